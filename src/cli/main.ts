/**
 * The `barbican` command: parses arguments and runs one subcommand. Returns the exit code so
 * that tests can run commands in-process.
 *
 * Each subcommand's code is imported when it runs, and the configuration starts loading in its
 * worker thread (src/cli/load.ts) before that import: on two or more cores the config is parsed
 * and validated while the command's code is compiled.
 */
import { isatty } from 'node:tty'
import { parseArgs } from 'node:util'
import { flushStderrLines } from '../telemetry/line-batch.ts'
import { type CliIo, type CommandOptions, unknownWord } from './command.ts'
import { COMMANDS, commandHelp } from './help.ts'
import { loadForCommand } from './load.ts'
import { serviceIo } from './logging.ts'

const USAGE = `Usage: barbican <command> [options]

Commands:
  serve   [--config FILE] [--listen HOST:PORT | --port N] [--allow-insecure-non-loopback]
          [--allow-floating] [--strict]
          Run the gateway over HTTP (default 127.0.0.1:7300).
  stdio   [--config FILE] [--server NAME] [--allow-floating] [--strict]
          Serve a virtual server on stdin/stdout.
  check   [--config FILE] [--pins] [--diff [--url URL]] [--allow-floating] [--verbose]
          [--strict]
          Validate the config, try every upstream once, report drift from the baseline;
          with --pins, fail on any definition that differs from its approved pin;
          with --diff, preview what reloading the file would change on the running gateway.
  scan    [--config FILE]
          Check what every upstream advertises for poisoning and imitated names.
  pins    list|diff [UPSTREAM [KEY]] | approve|reject UPSTREAM (KEY|--all) [--as NAME]
          | history [UPSTREAM [KEY]] | baseline      [--config FILE]
          Review quarantined changes; approve the configuration as the drift baseline.
  lock    [--config FILE]
          Write barbican.lock: exact versions and hashes of what stdio upstreams launch.
  keys    create ID [--subject S] [--tenant T] [--scope S]... | list | revoke ID [--config FILE]
          Manage the API keys of the keys file (auth.apiKeys.file).
  seal    --upstream NAME (--header NAME | --env NAME)   (secret on stdin)
          Encrypt a secret for an upstream's credentials with BARBICAN_SECRET_KEY.
  status  [--config FILE | --url URL] [--json]
          Print a running gateway's overview from its admin API (upstreams, servers, reloads).
  policy  explain --as SUBJECT --call TOOL [--args JSON] [--server NAME] [--config FILE]
          Ask the Cedar policies whether SUBJECT may call TOOL, and which policies decided.
  audit   verify | tail|query [--subject S] [--tool T] [--outcome O] [--since T] [--until T]
          [--limit N]      [--config FILE]
          Check the audit log's chain and signed checkpoints; read it as JSON lines.
  migrate [--config FILE]
          Bring the PostgreSQL schema up to date (BARBICAN_POSTGRES_URL or store.postgres).
  store   migrate --from sqlite:PATH [--tokens sqlite:PATH] --to postgres://…
          Move an embedded installation (pins, history, baselines, audit log) into PostgreSQL.
  import  [FILE…] [--output FILE]
          Turn Claude Desktop, Cursor, Windsurf, VS Code or Claude Code configs into
          barbican.yaml, with exact versions.

Without --config, barbican.yaml, barbican.yml or barbican.json in the working directory is used;
serve falls back to the embedded demo when none exists. barbican COMMAND --help explains one.

Example:
  barbican serve --config barbican.yaml
`

const defaultIo: CliIo = {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => {
    // Log lines still waiting in their batch come first (ADR 123).
    flushStderrLines()
    process.stderr.write(t)
  },
  // isatty(0), not process.stdin.isTTY: opening process.stdin would keep `serve` alive.
  ask: isatty(0) ? askTerminal : undefined,
}

/** One line from the terminal, after printing the question on stderr. */
async function askTerminal(question: string): Promise<string> {
  const { createInterface } = await import('node:readline/promises')
  const rl = createInterface({ input: process.stdin, output: process.stderr })
  try {
    return await rl.question(question)
  } finally {
    rl.close()
  }
}

export async function main(argv: readonly string[], io: CliIo = defaultIo): Promise<number> {
  let parsed: Parsed
  try {
    parsed = parse(argv)
  } catch (err) {
    io.stderr(`barbican: ${optionError(err as Error)}\n\n${USAGE}`)
    return 2
  }
  const answered = await answerWithoutCommand(parsed, io)
  if (answered !== undefined) return answered
  const listen = listenOf(parsed.values)
  if (listen instanceof Error) {
    io.stderr(`barbican: ${listen.message}\n`)
    return 2
  }
  return await runCommand(parsed, commandOptions(parsed.values, listen), io)
}

type Parsed = ReturnType<typeof parse>
type Values = Parsed['values']

/**
 * The exit code when no command runs: `--version`, help, or arguments a command does not take.
 * Undefined when the command is to run.
 */
async function answerWithoutCommand(
  { positionals, values }: Parsed,
  io: CliIo,
): Promise<number | undefined> {
  if (values.version) {
    const { VERSION } = await import('../common/version.ts')
    io.stdout(`barbican ${VERSION}\n`)
    return 0
  }
  const command = positionals[0]
  // `barbican serve --help` and `barbican help serve` explain one command.
  const topic = command === 'help' ? positionals[1] : values.help ? command : undefined
  if (topic !== undefined) {
    const help = commandHelp(topic)
    if (help === undefined) {
      io.stderr(`barbican: ${unknownWord('command', topic, COMMANDS)}\n\n${USAGE}`)
      return 2
    }
    io.stdout(help)
    return 0
  }
  if (values.help || command === undefined || command === 'help') {
    io.stdout(USAGE)
    return command === undefined && !values.help ? 2 : 0
  }
  if (positionals.length > 1 && command === 'seal') {
    // Not echoed: the argument is probably the secret, which must not be printed again.
    io.stderr(
      'barbican: seal takes the secret on stdin, never as an argument (it would show in ps and shell history); unexpected argument refused\n',
    )
    return 2
  }
  if (
    positionals.length > (command === 'audit' || command === 'policy' ? 2 : 1) &&
    command !== 'pins' &&
    command !== 'keys' &&
    command !== 'store' &&
    command !== 'import'
  ) {
    io.stderr(`barbican: unexpected argument "${positionals[1]}"\n\n${USAGE}`)
    return 2
  }
  return undefined
}

/** The options every command shares, from the parsed flags. */
function commandOptions(values: Values, listen: string | undefined): CommandOptions {
  return {
    config: values.config,
    listen,
    server: values.server,
    allowInsecureNonLoopback: values['allow-insecure-non-loopback'] === true,
    all: values.all === true,
    actor: values.as,
    subject: values.subject,
    tenant: values.tenant,
    scopes: values.scope,
    upstream: values.upstream,
    header: values.header,
    env: values.env,
    pins: values.pins === true,
    allowFloating: values['allow-floating'] === true,
    strict: values.strict === true,
    url: values.url,
    json: values.json === true,
    diff: values.diff === true,
    verbose: values.verbose === true,
  }
}

/** Runs the command named first: its code is imported once the config has started loading. */
async function runCommand(
  { positionals, values }: Parsed,
  options: CommandOptions,
  io: CliIo,
): Promise<number> {
  // Never undefined here: answerWithoutCommand answered a missing command with the usage.
  const command = positionals[0] ?? 'help'
  switch (command) {
    case 'serve': {
      const out = serviceIo(io, io !== defaultIo || process.stderr.isTTY === true)
      const loading = loadForCommand(options, out, true)
      const { runServe } = await import('./serve.ts')
      return await runServe(options, out, loading)
    }
    case 'stdio': {
      const out = serviceIo(io, io !== defaultIo || process.stderr.isTTY === true)
      const loading = loadForCommand(options, out, true)
      const { runStdio } = await import('./stdio.ts')
      return await runStdio(options, out, loading)
    }
    case 'check': {
      const loading = loadForCommand(options, io, false)
      const { runCheck } = await import('./check.ts')
      return await runCheck(options, io, loading)
    }
    case 'scan': {
      const loading = loadForCommand(options, io, false)
      const { runScan } = await import('./scan.ts')
      return await runScan(options, io, loading)
    }
    case 'pins': {
      const { runPins } = await import('./pins.ts')
      return await runPins(options, positionals.slice(1), io)
    }
    case 'audit': {
      const { runAudit } = await import('./audit.ts')
      return await runAudit(options, positionals.slice(1), values, io)
    }
    case 'lock': {
      const loading = loadForCommand(options, io, false)
      const { runLock } = await import('./pins.ts')
      return await runLock(options, io, loading)
    }
    case 'status': {
      // With --url the config is not needed; without a config file the demo's (default) address.
      const loading = values.url === undefined ? loadForCommand(options, io, true) : undefined
      const { runStatus } = await import('./status.ts')
      return await runStatus(options, io, loading)
    }
    case 'keys': {
      const { runKeys } = await import('./keys.ts')
      return await runKeys(options, positionals.slice(1), io)
    }
    case 'policy': {
      const loading = loadForCommand(options, io, false)
      const { runPolicy } = await import('./policy.ts')
      return await runPolicy(
        options,
        { call: values.call, args: values.args },
        positionals.slice(1),
        io,
        loading,
      )
    }
    case 'seal': {
      const { runSeal } = await import('./seal.ts')
      return await runSeal(options, io)
    }
    case 'migrate': {
      const { runMigrate } = await import('./store-migrate.ts')
      return await runMigrate(options, io)
    }
    case 'store': {
      const { runStoreMigrate } = await import('./store-migrate.ts')
      return await runStoreMigrate(
        positionals.slice(1),
        { from: values.from, to: values.to, tokens: values.tokens },
        io,
      )
    }
    case 'import': {
      const { runImport } = await import('./import.ts')
      return await runImport(positionals.slice(1), { output: values.output }, io)
    }
    default:
      io.stderr(`barbican: ${unknownWord('command', command, COMMANDS)}\n\n${USAGE}`)
      return 2
  }
}

const OPTIONS = {
  config: { type: 'string', short: 'c' },
  listen: { type: 'string', short: 'l' },
  port: { type: 'string', short: 'p' },
  'allow-floating': { type: 'boolean' },
  strict: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  server: { type: 'string' },
  'allow-insecure-non-loopback': { type: 'boolean' },
  all: { type: 'boolean' },
  as: { type: 'string' },
  pins: { type: 'boolean' },
  url: { type: 'string' },
  json: { type: 'boolean' },
  diff: { type: 'boolean' },
  verbose: { type: 'boolean' },
  subject: { type: 'string' },
  tenant: { type: 'string' },
  scope: { type: 'string', multiple: true },
  upstream: { type: 'string' },
  header: { type: 'string' },
  env: { type: 'string' },
  tool: { type: 'string' },
  call: { type: 'string' },
  args: { type: 'string' },
  outcome: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  checkpoint: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  tokens: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const

function parse(argv: readonly string[]) {
  return parseArgs({ args: [...argv], allowPositionals: true, strict: true, options: OPTIONS })
}

/** parseArgs' complaint, with the option that was probably meant. */
function optionError(err: Error): string {
  const typed = /^Unknown option '(-{1,2}[^']+)'/.exec(err.message)?.[1]
  if (typed === undefined) return err.message
  const known = Object.keys(OPTIONS).map((name) => `--${name}`)
  return unknownWord('option', typed, known)
}

/**
 * Where `serve` listens: `--listen HOST:PORT`, or `--port N` and `--listen N`, which both mean
 * loopback (127.0.0.1) on port N. An Error for a contradiction or a port that is not a number.
 */
function listenOf(values: { listen?: string; port?: string }): string | undefined | Error {
  if (values.port !== undefined && values.listen !== undefined)
    return new Error('give --listen or --port, not both')
  const bare = values.port ?? (/^\d+$/.test(values.listen ?? '') ? values.listen : undefined)
  if (bare === undefined) return values.listen
  const port = Number(bare)
  if (!/^\d+$/.test(bare) || port > 65535)
    return new Error(`--port expects a port number from 0 to 65535, got "${bare}"`)
  return `127.0.0.1:${port}`
}
