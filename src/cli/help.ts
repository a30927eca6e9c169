/** What `barbican COMMAND --help` prints: each command's synopsis, options and an example. */

/** The commands `barbican` knows, in the order the usage lists them. */
export const COMMANDS = ['serve', 'stdio', 'check', 'scan', 'pins', 'lock'] as const
export type CommandName = (typeof COMMANDS)[number]

const CONFIG = `  -c, --config FILE   the configuration (default: barbican.yaml, barbican.yml or
                      barbican.json in the working directory)`

const HELP: Readonly<Record<CommandName, string>> = {
  serve: `Usage: barbican serve [--config FILE] [--listen HOST:PORT] [--allow-insecure-non-loopback]

Run the gateway over HTTP: each virtual server at /mcp/NAME (the default one at /mcp). Without a
configuration file it serves the embedded demo.

Options:
${CONFIG}
  -l, --listen HOST:PORT   where to listen (default 127.0.0.1:7300, or the config's listen)
  --allow-insecure-non-loopback   listen beyond loopback without inbound auth (not advised)

Example:
  barbican serve --config barbican.yaml --listen 127.0.0.1:7300
`,
  stdio: `Usage: barbican stdio [--config FILE] [--server NAME]

Serve one virtual server on stdin/stdout, for MCP hosts that launch stdio servers.

Options:
${CONFIG}
  --server NAME       the virtual server to serve (default: the first in the config)

Example (an MCP host's server entry):
  { "command": "barbican", "args": ["stdio", "--config", "/home/me/barbican.yaml"] }
`,
  check: `Usage: barbican check [--config FILE]

Validate the configuration, try every upstream once and report drift from the approved
baseline. Exits non-zero with a precise message on any fault.

Options:
${CONFIG}

Example:
  barbican check --config barbican.yaml
`,
  scan: `Usage: barbican scan [--config FILE]

Check what every upstream advertises for hidden Unicode, instructions to the model, shadowing,
suspicious URLs and imitated names.

Options:
${CONFIG}

Example:
  barbican scan --config barbican.yaml
`,
  pins: `Usage: barbican pins list|diff [UPSTREAM [KEY]]
       barbican pins approve|reject UPSTREAM (KEY|--all) [--as NAME]
       barbican pins history [UPSTREAM [KEY]]
       barbican pins baseline

Review changes that upstreams made to what they advertise (held in quarantine) field by field,
approve or reject them, and approve the current configuration as the drift baseline.

Options:
${CONFIG}
  --all               approve or reject every pending change of the upstream
  --as NAME           who decides (default: the login name)

Example:
  barbican pins diff files && barbican pins approve files --all --as alice
`,
  lock: `Usage: barbican lock [--config FILE]

Write barbican.lock: the exact versions and hashes of what stdio upstreams launch.

Options:
${CONFIG}

Example:
  barbican lock --config barbican.yaml
`,
}

/** The help of `command`, or undefined when there is no such command. */
export function commandHelp(command: string): string | undefined {
  return (COMMANDS as readonly string[]).includes(command)
    ? HELP[command as CommandName]
    : undefined
}
