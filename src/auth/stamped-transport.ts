/**
 * An outbound transport wrapper that stamps every request made for a client's call with the
 * tool-call context (context.ts) just before it leaves: `_meta` for every transport, and headers
 * (assertion, trace context, the upstream credentials) where the transport speaks HTTP. When an
 * upstream needs an account link first, the request never leaves: the wrapper answers it itself
 * with the URL-elicitation error, as if the upstream had.
 */
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { ReceiveInfo, SendOptions, Transport } from '../transports/transport.ts'
import type { Stamp } from './context.ts'

/** Wraps `inner`; `ownerOf` tells whose call a request serves (undefined: Barbican's own). */
export function stampedTransport(
  inner: Transport,
  stamp: Stamp,
  ownerOf: (message: JsonRpcMessage) => unknown,
): Transport {
  return new StampedTransport(inner, stamp, ownerOf)
}

type MessageHandler = (message: JsonRpcMessage, info?: ReceiveInfo) => void

class StampedTransport implements Transport {
  readonly #inner: Transport
  readonly #stamp: Stamp
  readonly #ownerOf: (message: JsonRpcMessage) => unknown

  constructor(inner: Transport, stamp: Stamp, ownerOf: (message: JsonRpcMessage) => unknown) {
    this.#inner = inner
    this.#stamp = stamp
    this.#ownerOf = ownerOf
  }

  // Handlers live on the inner transport, which calls them; these accessors only delegate.
  get onmessage(): MessageHandler {
    return this.#inner.onmessage as MessageHandler
  }
  set onmessage(handler: MessageHandler) {
    this.#inner.onmessage = handler
  }
  get onclose(): () => void {
    return this.#inner.onclose as () => void
  }
  set onclose(handler: () => void) {
    this.#inner.onclose = handler
  }
  get onerror(): (error: Error) => void {
    return this.#inner.onerror as (error: Error) => void
  }
  set onerror(handler: (error: Error) => void) {
    this.#inner.onerror = handler
  }
  get sessionId(): string | undefined {
    return this.#inner.sessionId
  }

  start(): Promise<void> {
    return this.#inner.start()
  }

  close(): Promise<void> {
    return this.#inner.close()
  }

  async send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    const owner = 'method' in message && 'id' in message ? this.#ownerOf(message) : undefined
    if (owner === undefined || !('method' in message) || !('id' in message)) {
      return await this.#inner.send(message, options)
    }
    const stamped = await this.#stamp(message.method, message.params, owner)
    if ('reply' in stamped) {
      const { code, message: text, data } = stamped.reply
      const answer: JsonRpcMessage = {
        jsonrpc: '2.0',
        id: message.id,
        error: data === undefined ? { code, message: text } : { code, message: text, data },
      }
      // Delivered after send resolves, as an upstream's answer would be.
      setImmediate(() => this.#inner.onmessage?.(answer))
      return
    }
    const previous = (options as { headers?: Record<string, string> } | undefined)?.headers
    const send = { ...options, headers: { ...previous, ...stamped.headers } } as SendOptions
    const out: JsonRpcMessage =
      stamped.params === undefined
        ? { jsonrpc: '2.0', id: message.id, method: message.method }
        : { jsonrpc: '2.0', id: message.id, method: message.method, params: stamped.params }
    await this.#inner.send(out, send)
  }
}
