/** What `barbican COMMAND --help` prints: each command's synopsis, options and an example. */

/** The commands `barbican` knows, in the order the usage lists them. */
export const COMMANDS = [
  'serve',
  'stdio',
  'check',
  'scan',
  'pins',
  'lock',
  'keys',
  'seal',
  'status',
  'audit',
  'migrate',
  'store',
  'import',
  'policy',
] as const
export type CommandName = (typeof COMMANDS)[number]

const CONFIG = `  -c, --config FILE   the configuration (default: barbican.yaml, barbican.yml or
                      barbican.json in the working directory)`

const FLOATING = `  --allow-floating    launch packages given without an exact version, for this run only
                      (trust.allowFloating in the config allows it for good)`

const STRICT = `  --strict            refuse the configuration when a \${VAR} it uses is not set (default: an
                      upstream entry using it is held back, with the reason, and the rest run)`

const HELP: Readonly<Record<CommandName, string>> = {
  serve: `Usage: barbican serve [--config FILE] [--listen HOST:PORT | --port N]
                      [--allow-insecure-non-loopback] [--allow-floating] [--strict]

Run the gateway over HTTP: each virtual server at /mcp/NAME (the default one at /mcp). Without a
configuration file it serves the embedded demo.

Options:
${CONFIG}
  -l, --listen HOST:PORT   where to listen (default 127.0.0.1:7300, or the config's listen);
                           --listen N alone means 127.0.0.1:N
  -p, --port N             listen on 127.0.0.1:N
${FLOATING}
${STRICT}
  --allow-insecure-non-loopback   listen beyond loopback without inbound auth (not advised)

Example:
  barbican serve --config barbican.yaml --listen 127.0.0.1:7300
`,
  stdio: `Usage: barbican stdio [--config FILE] [--server NAME] [--allow-floating] [--strict]

Serve one virtual server on stdin/stdout, for MCP hosts that launch stdio servers.

Options:
${CONFIG}
  --server NAME       the virtual server to serve (default: the first in the config)
${FLOATING}
${STRICT}

Example (an MCP host's server entry):
  { "command": "barbican", "args": ["stdio", "--config", "/home/me/barbican.yaml"] }
`,
  check: `Usage: barbican check [--config FILE] [--pins] [--diff [--url URL]] [--allow-floating]
                      [--verbose] [--strict]

Validate the configuration (including the files its auth section names), try every upstream
once and report drift from the approved baseline. Exits non-zero with a precise message on any
fault.

Options:
${CONFIG}
  --pins              also fail on any tool, prompt, resource template, instructions or server
                      identity that differs from its approved pin (or was never approved),
                      printing the difference: a rug pull stops the pipeline
${FLOATING}
${STRICT}
  --diff              preview a reload: compare the file with the gateway running at --url
                      (default: the file's listen) through its admin API, and print the
                      upstreams, servers and tools added, removed or renamed, and the pins
                      affected (BARBICAN_ADMIN_TOKEN: the admin credential, when needed)
  --url URL           the running gateway, for --diff
  --verbose           say each server's sandbox in full: the mechanism and what it leaves
                      open, every grant with where it came from, every path not granted

Example (in CI, before deploying):
  barbican check --config barbican.yaml --pins
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
  status: `Usage: barbican status [--config FILE | --url URL] [--json]

Print what a running gateway shows: each upstream's state, transport, era, restarts and last
error; each virtual server with its upstreams and item counts; sessions; the last config
reload. Read from the gateway's admin API (GET /admin/api/status). An admin credential (scope
barbican:admin), needed off loopback or with inbound auth, is read from BARBICAN_ADMIN_TOKEN.

Options:
${CONFIG}
                      (its listen address is where the gateway is asked)
  --url URL           the gateway's address instead (e.g. http://127.0.0.1:7300)
  --json              print the admin API's JSON answer as it came

Example:
  barbican status --url http://127.0.0.1:7300
`,
  audit: `Usage: barbican audit verify [--checkpoint FILE]
       barbican audit tail [--limit N] [FILTERS]
       barbican audit query [--limit N] [FILTERS]

Check the audit log end to end (hash chain, no gaps, signed checkpoints): exit 0 when intact,
otherwise 1, naming the first record that does not verify (edited, deleted, reordered or cut
from the tail). verify also counts the records a killed gateway left in its journals (beside
audit.db, or in audit.journalDir: on a PostgreSQL replica, run it with that replica's config and
BARBICAN_AUDIT_JOURNAL_DIR). tail prints the newest records (default 20), query every matching
one, oldest first, as JSON lines (docs/audit.md).

Options:
${CONFIG}
  --subject S         records of this caller (or acting operator)
  --tool T            records of this tool, prompt, URI or pin key
  --outcome O         ok, error or denied
  --since T, --until T   ISO 8601 bounds on the record's time
  --limit N           at most N records
  --checkpoint FILE   verify: prove the log against these published checkpoints (default:
                      audit.checkpoints.publish); records after the last one are unproven

Example:
  barbican audit verify && barbican audit query --subject alice --outcome denied
`,
  policy: `Usage: barbican policy explain --as SUBJECT --call TOOL [--args JSON] [--server NAME]
         [--tenant T] [--scope S]...

Ask the configured Cedar policies (cedar.policies) whether SUBJECT may call TOOL with these
arguments, and print the decision and the policies that decided it (docs/policy.md). Exits 0
when allowed, 3 when denied. Offline: the tool's upstream is read from its namespaced name, its
annotations are unknown.

Options:
${CONFIG}
  --as SUBJECT        the caller's subject
  --call TOOL         the tool, as clients see it
  --args JSON         the call's arguments, a JSON object
  --server NAME       the virtual server (default: the first)
  --tenant T, --scope S   the caller's tenant and scopes

Example:
  barbican policy explain --as alice --call files__write_file --args '{"path":"/etc/passwd"}'
`,
  lock: `Usage: barbican lock [--config FILE]

Write barbican.lock: the exact versions and hashes of what stdio upstreams launch.

Options:
${CONFIG}

Example:
  barbican lock --config barbican.yaml
`,
  keys: `Usage: barbican keys create ID [--subject S] [--tenant T] [--scope S]...
       barbican keys list
       barbican keys revoke ID

Manage API keys in the keys file the configuration names (auth.apiKeys.file). create prints
the new key once, on stdout, and stores only its hash; revoke removes it, and a running gateway
refuses it from its next request. Keys written in the configuration itself are listed, never
edited.

Options:
${CONFIG}
  --subject S         who the key acts as (default: the ID)
  --tenant T          the subject's tenant
  --scope S           a scope the key grants (repeat for more)

Example:
  barbican keys create ci-bot --scope mcp:tools > ci-bot.key && barbican keys revoke ci-bot
`,
  seal: `Usage: barbican seal --upstream NAME (--header NAME | --env NAME)

Encrypt a secret read from stdin (never from the command line) with BARBICAN_SECRET_KEY, for
one header or environment variable of an upstream's static credentials, and print the
enc:v1:… value to write in the configuration. The value opens only in that slot.

Options:
  --upstream NAME     the upstream the secret is for
  --header NAME       the HTTP header it is sent in (remote upstreams)
  --env NAME          the environment variable it is given in (stdio upstreams)

Example:
  printf %s "$GITHUB_TOKEN" | barbican seal --upstream github --header Authorization
`,
  migrate: `Usage: barbican migrate [--config FILE]

Bring the PostgreSQL schema (store.postgres.url, or BARBICAN_POSTGRES_URL) up to date. Safe to
run again and from several replicas at once: each migration is applied once, under a lock.
serve runs it at start unless store.postgres.migrate is false; then a replica facing an older
schema refuses to start until this has run (docs/configuration.md).

Options:
${CONFIG}

Example:
  BARBICAN_POSTGRES_URL=postgres://barbican@db/barbican barbican migrate
`,
  store: `Usage: barbican store migrate --from sqlite:PATH [--tokens sqlite:PATH] --to postgres://…

Move an embedded installation into PostgreSQL: the pins, pending changes, their history and
baselines of the store file PATH, and the audit log beside it (audit.db) with its chain and
signed checkpoints, so barbican audit verify still accepts it; with --tokens, the linked
upstream tokens and dynamic client registrations of the auth.tokens.sqlite file, still sealed
(the replicas need the same BARBICAN_SECRET_KEY to read them). One transaction, into a database
without Barbican data. API keys stay in their keys file.

Options:
  --from sqlite:PATH    the store file (.barbican/barbican.db beside the config by default)
  --tokens sqlite:PATH  the linked-tokens file (auth.tokens.sqlite), when there is one
  --to URL              postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE

Example:
  barbican store migrate --from sqlite:.barbican/barbican.db --tokens sqlite:.barbican/tokens.db \\
    --to "$BARBICAN_POSTGRES_URL"
`,
  import: `Usage: barbican import [FILE…] [--output FILE]

Turn the MCP client configs you already have into one barbican.yaml: every server of the given
files, or of the usual Claude Desktop, Cursor, Windsurf, VS Code and Claude Code files when none
is given. Packages launched with npx without a version are pinned to the exact version the npm
registry serves today (the npx cache when offline). Prints how to point each client at Barbican.

Options:
  -o, --output FILE   where to write (default: barbican.yaml here; never overwritten)

Example:
  barbican import ~/.config/Claude/claude_desktop_config.json
`,
}

/** The help of `command`, or undefined when there is no such command. */
export function commandHelp(command: string): string | undefined {
  return (COMMANDS as readonly string[]).includes(command)
    ? HELP[command as CommandName]
    : undefined
}
