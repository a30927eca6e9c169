/**
 * undici, ws and jose, loaded on first use: only some configurations need them, and a static
 * import cost every gateway ~200 ms of start-up and tens of MB (ADR 011). A build loads the
 * one-file copies that scripts/build.js writes beside it (ADR 015).
 */
import { createRequire } from 'node:module'
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
