/**
 * The client end of one in-process 2026-07-28 request: a session of its own, closed as its
 * reply arrives, as `StatelessTransport` closes once the response is written. For tests and
 * benches that drive a Gateway without HTTP.
 */
import type { JsonRpcMessage, JsonRpcRequest } from '../../src/protocol/jsonrpc.ts'
import type { Transport } from '../../src/transports/transport.ts'

export class StatelessEnd implements Transport {
  onmessage?: (message: JsonRpcMessage) => void
  onclose?: () => void
  #resolve: ((message: JsonRpcMessage) => void) | undefined
  async start(): Promise<void> {}
  async close(): Promise<void> {
    this.onclose?.()
  }
  async send(message: JsonRpcMessage): Promise<void> {
    if ('id' in message && !('method' in message)) {
      this.#resolve?.(message)
      void this.close()
    }
  }
  request(message: JsonRpcRequest): Promise<JsonRpcMessage> {
    return new Promise((resolve) => {
      this.#resolve = resolve
      this.onmessage?.(message)
    })
  }
}

/** What a 2026-07-28 request carries in `_meta` instead of a session's handshake. */
export const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
}
