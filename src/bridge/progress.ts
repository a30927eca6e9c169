/**
 * Progress tokens are chosen by clients and only unique per client, while one upstream
 * connection serves many clients. Each forwarded request with a progress token gets a
 * gateway-unique token upstream; notifications come back through this map to the right client
 * with the client's own token.
 */
import type { JsonRpcId } from '../protocol/jsonrpc.ts'

export interface ProgressSink {
  /** Delivers a progress notification's params (with the client's token restored). */
  progress(params: Record<string, unknown>, relatedRequestId: JsonRpcId): void
}

interface Route {
  readonly sink: ProgressSink
  readonly token: string | number
  readonly relatedRequestId: JsonRpcId
}

export class ProgressRouter {
  #next = 1
  #routes = new Map<string, Route>()

  /** Registers a client token; returns the token to send upstream and a release function. */
  register(sink: ProgressSink, token: string | number, relatedRequestId: JsonRpcId) {
    const upstreamToken = `barbican-progress-${this.#next++}`
    this.#routes.set(upstreamToken, { sink, token, relatedRequestId })
    return { upstreamToken, release: () => this.#routes.delete(upstreamToken) }
  }

  /** Routes an upstream progress notification; false when the token is unknown (dropped). */
  route(params: Record<string, unknown> | undefined): boolean {
    const token = params?.progressToken
    if (typeof token !== 'string') return false
    const route = this.#routes.get(token)
    if (!route) return false
    route.sink.progress({ ...params, progressToken: route.token }, route.relatedRequestId)
    return true
  }

  get size(): number {
    return this.#routes.size
  }
}
