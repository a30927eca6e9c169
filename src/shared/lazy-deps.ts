/**
 * The heavy dependencies only some configurations use (undici for HTTP upstreams and fetches, ws
 * for WebSocket, jose for auth), loaded on first use instead of at start. Importing them
 * statically cost every gateway ~200 ms of start-up and tens of MB of memory, even one that
 * only fronts stdio servers without auth (measured in docs/performance.md). The loads are
 * synchronous (`require`, which also loads ES modules such as jose on Node 22.12+) so callers
 * keep their synchronous constructors; types are still imported with `import type`.
 *
 * From the sources they come from node_modules; a build (scripts/build.js, ADR 015) puts a
 * one-file copy of each beside its own code, which loads in about half the time and memory of
 * the package's dozens of modules.
 */
import { createRequire } from 'node:module'
import { setFlagsFromString } from 'node:v8'
import type * as Jose from 'jose'
import type * as Undici from 'undici'
import type WebSocket from 'ws'
import type { WebSocketServer } from 'ws'

const require = createRequire(import.meta.url)
/** Whether this module runs from a build (dist/*.js) rather than from its TypeScript source. */
const BUILT = import.meta.url.endsWith('.js')
/** The package itself, or its one-file copy in dist/ when running from a build. */
const from = (name: string): string => (BUILT ? `./${name}.cjs` : name)

let undiciModule: typeof Undici | undefined
/** What `require('ws')` returns: the client class, with the server class as a property. */
type WsModule = typeof WebSocket & { readonly WebSocketServer: typeof WebSocketServer }

let wsModule: WsModule | undefined
let joseModule: typeof Jose | undefined

/** V8 flags that choose how WebAssembly is compiled; if the operator set one, Barbican keeps out. */
const WASM_TIER_FLAGS = ['--liftoff', '--no-liftoff', '--wasm-tier-up', '--no-wasm-tier-up']

/**
 * Whether to compile WebAssembly with V8's baseline compiler only. undici's HTTP parser (llhttp)
 * is the only WebAssembly Barbican runs; by default V8 compiles it twice (baseline, then
 * optimised in the background once it runs hot), which leaves ~6 MB of code and compiler memory
 * in every gateway with an HTTP upstream. Parsing a response head is a few hundred instructions
 * either way, so per-call CPU does not change measurably (docs/performance.md).
 */
export function wantsBaselineWasm(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string | undefined = process.env.NODE_OPTIONS,
): boolean {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)]
  return !given.some((arg) => WASM_TIER_FLAGS.some((flag) => arg.startsWith(flag)))
}

/** undici, the HTTP client of outbound transports and guarded fetches. */
export function undici(): typeof Undici {
  if (undiciModule === undefined && wantsBaselineWasm()) setFlagsFromString('--liftoff-only')
  undiciModule ??= require(from('undici')) as typeof Undici
  return undiciModule
}

/** ws: its WebSocket client class, which also carries `WebSocketServer`. */
export function ws(): WsModule {
  wsModule ??= require(from('ws')) as WsModule
  return wsModule
}

/** jose, for verifying bearer tokens and signing on-behalf-of assertions. */
export function jose(): typeof Jose {
  joseModule ??= require(from('jose')) as typeof Jose
  return joseModule
}
