/**
 * undici, ws, jose, prom-client, Ajv, Cedar, node-postgres, node-redis and QuickJS, loaded on
 * first use: only some configurations and commands need them, and a static import cost every
 * gateway ~200 ms of start-up and tens of MB (ADR 011). A build loads the one-file copies that
 * scripts/build.js writes beside it (ADR 015).
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type * as CedarWasm from '@cedar-policy/cedar-wasm/nodejs'
import type * as Jose from 'jose'
import type * as PromClient from 'prom-client'
import type * as QuickJS from 'quickjs-emscripten'
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

/** undici, the HTTP client of outbound transports and guarded fetches. */
export function undici(): typeof Undici {
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

/** The parts of prom-client Barbican uses (docs/observability.md). */
export interface PromClientParts {
  readonly Registry: typeof PromClient.Registry
  readonly Counter: typeof PromClient.Counter
  readonly Gauge: typeof PromClient.Gauge
  readonly Histogram: typeof PromClient.Histogram
  readonly collectDefaultMetrics: typeof PromClient.collectDefaultMetrics
}

let promClientParts: PromClientParts | undefined

/**
 * prom-client's registry, metric types and default metrics, without its package entry: that one
 * also loads the Pushgateway (node:https, node:zlib) and Summary (tdigest), which Barbican never
 * uses. The build bundles the same five modules into prom-client.cjs.
 */
export function promClient(): PromClientParts {
  if (promClientParts) return promClientParts
  if (BUILT) {
    promClientParts = require('./prom-client.cjs') as PromClientParts
    return promClientParts
  }
  promClientParts = {
    Registry: require('prom-client/lib/registry'),
    Counter: require('prom-client/lib/counter'),
    Gauge: require('prom-client/lib/gauge'),
    Histogram: require('prom-client/lib/histogram'),
    collectDefaultMetrics: require('prom-client/lib/defaultMetrics'),
  }
  return promClientParts
}

/** The Ajv class for JSON Schema 2020-12 (the MCP default dialect), for the guards policy. */
export type AjvClass = typeof import('ajv/dist/2020.js').default

let ajvClass: AjvClass | undefined

/** Ajv, loaded only when argument or output guards are configured. */
export function ajv(): AjvClass {
  if (ajvClass === undefined) {
    const module = require(BUILT ? './ajv.cjs' : 'ajv/dist/2020') as { default: AjvClass }
    ajvClass = module.default
  }
  return ajvClass
}

let cedarModule: typeof CedarWasm | undefined

/**
 * Cedar's WebAssembly build (4 MB, compiled on first use), only when a Cedar policy is
 * configured. Its Node entry reads the .wasm beside it, so even a build loads it from the package.
 */
export function cedar(): typeof CedarWasm {
  cedarModule ??= require('@cedar-policy/cedar-wasm/nodejs') as typeof CedarWasm
  return cedarModule
}

let pgModule: typeof import('pg') | undefined

/**
 * node-postgres, only when PostgreSQL is configured (ADR 055). Loaded from its package, never
 * bundled: its optional native binding is resolved at run time.
 */
export function pg(): typeof import('pg') {
  pgModule ??= require('pg') as typeof import('pg')
  return pgModule
}

let redisModule: typeof import('redis') | undefined

/** node-redis, only when Redis is configured (ADR 055). Loaded from its package. */
export function redis(): typeof import('redis') {
  redisModule ??= require('redis') as typeof import('redis')
  return redisModule
}

/** A QuickJS module: one WebAssembly instance with its own linear memory. */
export type QuickJSModule = Awaited<ReturnType<typeof QuickJS.newQuickJSWASMModule>>

/** The two WebAssembly constructors used here (the Node typings leave the global untyped). */
interface Wasm {
  Module: new (bytes: Uint8Array) => object
  Memory: new (descriptor: { initial: number; maximum: number }) => object
}
const wasmApi = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly

let quickjsParts: { api: typeof QuickJS; wasm: object } | undefined

/**
 * A new QuickJS instance whose linear memory can never grow past `maxBytes` (code mode, ADR
 * 075): the WebAssembly module is compiled once, on first use, and instantiated per call. The
 * package reads its .wasm from its own folder, so even a build loads it from the package.
 */
export function newQuickJS(maxBytes: number): Promise<QuickJSModule> {
  if (quickjsParts === undefined) {
    const api = require('quickjs-emscripten') as typeof QuickJS
    const variants = createRequire(require.resolve('quickjs-emscripten'))
    const file = variants.resolve('@jitl/quickjs-wasmfile-release-sync/wasm')
    quickjsParts = { api, wasm: new wasmApi.Module(readFileSync(file)) }
  }
  const { api, wasm } = quickjsParts
  const page = 65536
  // 256 pages (16 MiB) is the build's initial memory, which QuickJS's own start-up uses a part of.
  const maximum = 256 + Math.ceil(maxBytes / page)
  const memory = new wasmApi.Memory({ initial: 256, maximum })
  const variant = api.newVariant(api.RELEASE_SYNC, {
    wasmModule: wasm as never,
    wasmMemory: memory as never,
  })
  return api.newQuickJSWASMModuleFromVariant(variant)
}
