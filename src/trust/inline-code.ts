/**
 * How an interpreter's command line says what it runs: a script file, or code that no file
 * holds (an `-e`/`-c` argument, a `data:` URL preloaded, a program read from stdin). Code of the
 * second kind cannot be pinned by `barbican.lock`, so the launch check refuses it unless the
 * operator allows it for that upstream (`trust.allowInlineCode`).
 *
 * The readers are deliberately suspicious: an argument form they do not understand as a script
 * is read as the more dangerous one (a short option cluster holding `e` or `p` for node, an `c`
 * anywhere in a python option cluster), because interpreters accept more spellings than any
 * list of examples.
 */

/** What an interpreter's argv runs. */
export type InterpreterRun =
  | { readonly kind: 'script'; readonly path: string }
  | { readonly kind: 'inline'; readonly reason: string }
  /** Something Barbican does not pin (a python module, a deno remote module): run as given. */
  | undefined

/** Node options whose value is a module loaded before the program. */
const NODE_PRELOAD_FLAGS = new Set([
  '-r',
  '--require',
  '--import',
  '--loader',
  '--experimental-loader',
])
/** Node options that run code written on the command line. */
const NODE_EVAL_FLAGS = new Set(['-e', '--eval', '-p', '--print', '-pe', '-ep'])
/** Node options that take the next argument as their value (so it is not the script). */
const NODE_VALUE_FLAGS = new Set([
  ...NODE_PRELOAD_FLAGS,
  '-C',
  '--conditions',
  '--env-file',
  '--env-file-if-exists',
  '--title',
  '--input-type',
  '--inspect-port',
  '--debug-port',
  '--redirect-warnings',
  '--disable-warning',
  '--diagnostic-dir',
  '--report-dir',
  '--report-directory',
  '--report-filename',
  '--report-signal',
  '--heapsnapshot-signal',
  '--icu-data-dir',
  '--openssl-config',
  '--dns-result-order',
  '--unhandled-rejections',
  '--watch-path',
  '--localstorage-file',
  '--snapshot-blob',
  '--trace-event-categories',
  '--trace-event-file-pattern',
  '--cpu-prof-dir',
  '--cpu-prof-name',
  '--heap-prof-dir',
  '--heap-prof-name',
  '--secure-heap',
  '--secure-heap-min',
  '--max-http-header-size',
  '--stack-trace-limit',
  '--tls-cipher-list',
  '--tls-keylog',
  '--use-largepages',
])

/** A module specifier that is a URL of some scheme other than a local file or a builtin. */
function codeUrlScheme(specifier: string): string | undefined {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]+):/.exec(specifier.trim())?.[1]?.toLowerCase()
  if (scheme === undefined || scheme === 'file' || scheme === 'node') return undefined
  return scheme
}

function splitInline(arg: string): [string, string | undefined] {
  const eq = arg.indexOf('=')
  return eq < 0 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)]
}

const inline = (reason: string): InterpreterRun => ({ kind: 'inline', reason })

/** `node [options] script [args]`, and every way node has to run code that is not a file. */
export function nodeRun(args: readonly string[], runner = 'node'): InterpreterRun {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '--') return programArg(runner, args[i + 1])
    if (arg === '-') return inline(`${runner} - reads its program from stdin`)
    if (!arg.startsWith('-')) return programArg(runner, arg)
    const [flag, value] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
    if (NODE_EVAL_FLAGS.has(flag))
      return inline(`${runner} ${flag} runs code given on the command line`)
    if (flag === '-i' || flag === '--interactive')
      return inline(`${runner} ${flag} runs code read from stdin`)
    if (flag === '--run')
      return inline(`${runner} --run runs a package.json script through a shell`)
    if (NODE_PRELOAD_FLAGS.has(flag)) {
      const module = value ?? args[++i] ?? ''
      const scheme = codeUrlScheme(module)
      if (scheme !== undefined)
        return inline(`${runner} ${flag} ${scheme}: loads code given on the command line`)
      continue
    }
    if (NODE_VALUE_FLAGS.has(flag)) {
      if (value === undefined) i++
      continue
    }
    // `-pe` is node's own spelling; any other cluster of short options holding e, p or i is
    // read as one too rather than guessed to be harmless.
    if (!arg.startsWith('--') && arg.length > 2 && /[epi]/.test(arg.slice(1)))
      return inline(`${runner} ${arg} runs code given on the command line`)
  }
  return inline(`${runner} without a script reads its program from stdin`)
}

function programArg(runner: string, program: string | undefined): InterpreterRun {
  if (program === undefined || program === '-')
    return inline(`${runner} without a script reads its program from stdin`)
  return { kind: 'script', path: program }
}

/** Options in `NODE_OPTIONS` that load code (node refuses `--eval` there, `--import` not). */
export function nodeOptionsRun(nodeOptions: string): InterpreterRun {
  // Quotes are dropped rather than parsed: a quoted value holding spaces is cut at the first
  // one, which still leaves its scheme in front, where the check looks.
  const tokens = nodeOptions
    .split(/\s+/)
    .map((t) => t.replace(/['"]/g, ''))
    .filter((t) => t !== '')
  for (let i = 0; i < tokens.length; i++) {
    const [flag, value] = tokens[i]!.startsWith('--') ? splitInline(tokens[i]!) : [tokens[i]!]
    if (NODE_EVAL_FLAGS.has(flag))
      return inline(`NODE_OPTIONS ${flag} runs code given in the environment`)
    if (NODE_PRELOAD_FLAGS.has(flag)) {
      const scheme = codeUrlScheme(value ?? tokens[++i] ?? '')
      if (scheme !== undefined)
        return inline(`NODE_OPTIONS ${flag} ${scheme}: loads code given in the environment`)
    }
  }
  return undefined
}

/** `python [options] script [args]`; `-c`, `-`, `-i` and no script run code no file holds. */
export function pythonRun(args: readonly string[], runner = 'python'): InterpreterRun {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '--') return programArg(runner, args[i + 1])
    if (arg === '-') return inline(`${runner} - reads its program from stdin`)
    if (!arg.startsWith('-')) return programArg(runner, arg)
    if (arg.startsWith('--')) {
      if (arg === '--check-hash-based-pycs') i++
      continue
    }
    // A cluster of short options, as python's getopt reads it: `c` ends the options and the
    // rest (or the next argument) is code; `m` names a module; `W` and `X` take a value.
    for (let j = 1; j < arg.length; j++) {
      const letter = arg[j]!
      if (letter === 'c') return inline(`${runner} ${arg} runs code given on the command line`)
      if (letter === 'i') return inline(`${runner} ${arg} runs code read from stdin`)
      if (letter === 'm') return undefined
      if (letter === 'W' || letter === 'X') {
        if (j === arg.length - 1) i++
        break
      }
    }
  }
  return inline(`${runner} without a script reads its program from stdin`)
}

/** Deno subcommands that run code the command line or a terminal gives. */
const DENO_INLINE_SUBCOMMANDS: Readonly<Record<string, string>> = {
  eval: 'runs code given on the command line',
  repl: 'runs code read from stdin',
  task: "runs a deno.json task's shell command",
}
const DENO_VALUE_FLAGS = new Set([
  '-c',
  '--config',
  '--import-map',
  '--lock',
  '--cert',
  '--location',
  '--seed',
  '-L',
  '--log-level',
  '--ext',
  '--preload',
])

/** `deno [run] [options] module`: `eval`, `repl`, `task`, stdin and `data:` modules are inline. */
export function denoRun(args: readonly string[]): InterpreterRun {
  let subcommand: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-') return inline('deno - reads its program from stdin')
    if (arg.startsWith('-')) {
      const [flag, value] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
      if (flag === '-e' || flag === '--eval')
        return inline(`deno ${flag} runs code given on the command line`)
      if (flag === '--preload' || flag === '--import' || flag === '--require') {
        const scheme = codeUrlScheme(value ?? args[i + 1] ?? '')
        if (scheme === 'data')
          return inline(`deno ${flag} data: loads code given on the command line`)
      }
      if (DENO_VALUE_FLAGS.has(flag) && value === undefined) i++
      continue
    }
    if (subcommand === undefined) {
      const reason = DENO_INLINE_SUBCOMMANDS[arg]
      if (reason !== undefined) return inline(`deno ${arg} ${reason}`)
      if (arg === 'run') {
        subcommand = arg
        continue
      }
    }
    if (codeUrlScheme(arg) === 'data')
      return inline('deno data: runs code given on the command line')
    return undefined
  }
  return inline('deno without a module reads its program from stdin')
}

/** `bun [run] [options] file`: `-e`, `-p`, `repl`, stdin and `data:` modules are inline. */
export function bunRun(args: readonly string[]): InterpreterRun {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-') return inline('bun - reads its program from stdin')
    if (arg.startsWith('-')) {
      const [flag, value] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
      if (flag === '-e' || flag === '--eval' || flag === '-p' || flag === '--print')
        return inline(`bun ${flag} runs code given on the command line`)
      if (flag === '-r' || flag === '--preload' || flag === '--require' || flag === '--import') {
        const module = value ?? args[++i] ?? ''
        const scheme = codeUrlScheme(module)
        if (scheme !== undefined)
          return inline(`bun ${flag} ${scheme}: loads code given on the command line`)
      }
      continue
    }
    if (arg === 'run') continue
    if (arg === 'repl') return inline('bun repl runs code read from stdin')
    if (codeUrlScheme(arg) === 'data')
      return inline('bun data: runs code given on the command line')
    return undefined
  }
  // Without a file bun prints its help; nothing runs.
  return undefined
}
