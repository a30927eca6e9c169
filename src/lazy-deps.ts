/**
 * The heavy dependencies only some configurations use (undici for HTTP upstreams and fetches, ws
 * for WebSocket, jose for auth), loaded on first use instead of at start. Importing them
 * statically cost every gateway ~200 ms of start-up and tens of MB of memory, even one that
 * only fronts stdio servers without auth (measured in docs/performance.md). The loads are
 * synchronous (`require`, which also loads ES modules such as jose on Node 22.12+) so callers
 * keep their synchronous constructors; types are still imported with `import type`.
 */
import { createRequire } from 'node:module'
import type * as Jose from 'jose'
import type * as Undici from 'undici'
import type WebSocket from 'ws'
import type { WebSocketServer } from 'ws'

const require = createRequire(import.meta.url)

let undiciModule: typeof Undici | undefined
/** What `require('ws')` returns: the client class, with the server class as a property. */
type WsModule = typeof WebSocket & { readonly WebSocketServer: typeof WebSocketServer }

let wsModule: WsModule | undefined
let joseModule: typeof Jose | undefined

/** undici, the HTTP client of outbound transports and guarded fetches. */
export function undici(): typeof Undici {
  undiciModule ??= require('undici') as typeof Undici
  return undiciModule
}

/** ws: its WebSocket client class, which also carries `WebSocketServer`. */
export function ws(): WsModule {
  wsModule ??= require('ws') as WsModule
  return wsModule
}

/** jose, for verifying bearer tokens and signing on-behalf-of assertions. */
export function jose(): typeof Jose {
  joseModule ??= require('jose') as typeof Jose
  return joseModule
}
