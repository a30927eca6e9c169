// Bundles src/ into dist/ with esbuild (ADR 015) and stamps the build with the time it started.
// bin/barbican.js runs dist/ only when no source file is newer than that stamp, so a stale build
// is never run. Run by hand (`npm run build`) or as `prepack`, before `npm pack` / `npm publish`.
// Without --strict (or those npm commands) a failed build
// only warns and leaves no stamp (the command then runs the sources).
//
// What dist/ holds, all in one folder (code finds its neighbours relative to its own URL):
// - main.js: the command (src/cli/main.ts) and everything it imports statically, with picomatch
//   and eventsource-parser inside; code behind a dynamic import() in chunk-*.js files loaded on
//   first use;
// - code-worker.js: the worker thread code-mode programs run in (QuickJS from its package);
// - config-worker.js: the worker thread that loads the configuration, with yaml and zod inside;
// - undici.cjs, ws.cjs, jose.cjs, ajv.cjs: one-file copies of the dependencies src/common/lazy-deps.ts loads on
//   first use, each bundled from the package's public entry (one file to read and compile
//   instead of dozens of modules); prom-client.cjs: the five prom-client modules it uses.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { builtinModules, createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
// `npm pack` and `npm publish` run this as `prepack`: a tarball without dist/ must not be made.
const strict =
  process.argv.includes('--strict') || ['pack', 'publish'].includes(process.env.npm_command ?? '')
// `--out DIR` builds elsewhere (the build's own test); the default is dist/.
const out = process.argv.indexOf('--out')
const dist =
  out >= 0
    ? `${process.argv[out + 1].replace(/[\\/]$/, '')}/`
    : fileURLToPath(new URL('../dist/', import.meta.url))
// Taken before anything is read: an edit made while the build runs leaves the source newer.
const started = Date.now()

function fail(message) {
  process.stderr.write(
    `barbican build: ${message}\ndist/ is not stamped, so bin/barbican.js runs the sources.\n`,
  )
  process.exit(strict ? 1 : 0)
}

const builtins = new Set(builtinModules)

/**
 * Static imports of Node's built-in modules become `process.getBuiltinModule()`, which reads a
 * property only when the code uses it (docs/performance.md, Tuning notes). Dynamic
 * `import('node:…')` is left to Node.
 */
const builtinsPlugin = {
  name: 'node-builtins',
  setup(build) {
    build.onResolve({ filter: /^(node:)?[a-z_/0-9]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, '')
      if (!args.path.startsWith('node:') && !builtins.has(name)) return undefined
      if (args.kind === 'dynamic-import') return { path: args.path, external: true }
      return { path: `node:${name}`, namespace: 'node-builtin' }
    })
    build.onLoad({ filter: /.*/, namespace: 'node-builtin' }, (args) => ({
      contents: `module.exports = process.getBuiltinModule(${JSON.stringify(args.path)})`,
      loader: 'js',
    }))
  },
}

/** zod's locale index reduced to the English messages it uses by default. */
const zodLocalesPlugin = {
  name: 'zod-locales',
  setup(build) {
    build.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      /[\\/]zod[\\/]/.test(args.importer)
        ? { path: 'zod-locales', namespace: 'zod-locales' }
        : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'zod-locales' }, () => ({
      contents: "export { default as en } from 'zod/v4/locales/en.js'",
      loader: 'js',
      resolveDir: root,
    }))
  },
}

const common = {
  absWorkingDir: root,
  bundle: true,
  platform: 'node',
  target: 'node22',
  // Whitespace and syntax only: names stay readable in stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  // Non-ASCII text would make V8 hold a whole file as a two-byte string.
  charset: 'ascii',
  // License comments go to *.LEGAL.txt beside each file: one of them has a non-ASCII name in it.
  legalComments: 'linked',
  sourcemap: true,
  logLevel: 'warning',
}

let esbuild
try {
  esbuild = await import('esbuild')
} catch (err) {
  fail(`esbuild is not installed (${err.message})`)
}
rmSync(dist, { recursive: true, force: true })
try {
  await esbuild.build({
    ...common,
    entryPoints: { main: 'src/cli/main.ts' },
    outdir: dist,
    format: 'esm',
    splitting: true,
    chunkNames: 'chunk-[hash]',
    // Loaded through src/common/lazy-deps.ts from their own one-file copies below; Extism,
    // Cedar, pg, redis and QuickJS from their packages (Cedar's Node entry and QuickJS read
    // their .wasm from their own folders; pg and redis only when a fleet backend is configured,
    // ADR 055; QuickJS only in code mode, ADR 075).
    external: [
      'undici',
      'ws',
      'jose',
      'prom-client',
      'prom-client/*',
      '@extism/extism',
      '@cedar-policy/cedar-wasm/*',
      'pg',
      'redis',
      'quickjs-emscripten',
    ],
    plugins: [builtinsPlugin, zodLocalesPlugin],
  })
  // The config loader's worker thread (src/config/load-worker.ts), with yaml, zod and the config
  // schema, which therefore stay out of main.js and out of a running gateway's memory.
  await esbuild.build({
    ...common,
    entryPoints: { 'config-worker': 'src/config/load-worker.ts' },
    outdir: dist,
    format: 'esm',
    plugins: [builtinsPlugin, zodLocalesPlugin],
  })
  // The worker thread code-mode programs run in (src/exposure/code-worker.ts, ADR 075); QuickJS
  // stays in its package as for main.js.
  await esbuild.build({
    ...common,
    entryPoints: { 'code-worker': 'src/exposure/code-worker.ts' },
    outdir: dist,
    format: 'esm',
    external: ['quickjs-emscripten'],
    plugins: [builtinsPlugin],
  })
  // The file `require(name)` loads from the sources (ws's CommonJS entry, not its ES wrapper).
  const resolve = createRequire(import.meta.url).resolve
  const lazy = { undici: 'undici', ws: 'ws', jose: 'jose', ajv: 'ajv/dist/2020' }
  for (const [name, entry] of Object.entries(lazy)) {
    await esbuild.build({
      ...common,
      entryPoints: [resolve(entry)],
      outfile: `${dist}${name}.cjs`,
      format: 'cjs',
    })
  }
  // prom-client without its package entry (src/common/lazy-deps.ts says why): five modules.
  const lib = (m) => `require('prom-client/lib/${m}')`
  await esbuild.build({
    ...common,
    stdin: {
      contents: `module.exports = { Registry: ${lib('registry')}, Counter: ${lib('counter')}, Gauge: ${lib('gauge')}, Histogram: ${lib('histogram')}, collectDefaultMetrics: ${lib('defaultMetrics')} }`,
      resolveDir: root,
      loader: 'js',
    },
    outfile: `${dist}prom-client.cjs`,
    format: 'cjs',
  })
} catch (err) {
  rmSync(dist, { recursive: true, force: true })
  fail(`esbuild failed: ${err.message}`)
}
mkdirSync(dist, { recursive: true })
writeFileSync(`${dist}.build-started`, `${started}\n`)
