/**
 * An outbound transport wrapper that stamps every request made for a client's call with the
 * tool-call context (context.ts) just before it leaves: `_meta` for every transport, and headers
 * (assertion, trace context, the upstream credentials) where the transport speaks HTTP. When an
 * upstream needs an account link first, the request never leaves: the wrapper answers it itself
 * with the URL-elicitation error, as if the upstream had.
 */

import type { Stamp } from '../auth/context.ts'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { ErrorReply } from '../protocol/model.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

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
  #onmessage: MessageHandler | undefined
  /** Requests sent with per-user credentials, by id: what to do if the upstream refuses them. */
  readonly #rejections = new Map<string, () => Promise<ErrorReply | undefined>>()

  constructor(inner: Transport, stamp: Stamp, ownerOf: (message: JsonRpcMessage) => unknown) {
    this.#inner = inner
    this.#stamp = stamp
    this.#ownerOf = ownerOf
  }

  // Handlers live on the inner transport, which calls them; these accessors only delegate.
  get onmessage(): MessageHandler {
    return this.#onmessage as MessageHandler
  }
  set onmessage(handler: MessageHandler) {
    this.#onmessage = handler
    this.#inner.onmessage = (message, info) => this.#receive(message, info)
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
  get closeError(): Error | undefined {
    return this.#inner.closeError
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
    if (stamped.onRejected) {
      if (this.#rejections.size >= MAX_TRACKED) {
        this.#rejections.delete(this.#rejections.keys().next().value as string)
      }
      this.#rejections.set(String(message.id), stamped.onRejected)
    }
    const send: SendOptions = { ...options, headers: { ...options?.headers, ...stamped.headers } }
    const out: JsonRpcMessage =
      stamped.params === undefined
        ? { jsonrpc: '2.0', id: message.id, method: message.method }
        : { jsonrpc: '2.0', id: message.id, method: message.method, params: stamped.params }
    await this.#inner.send(out, send)
  }

  /**
   * Answers from the upstream. A 401 to a request sent with a user's upstream token means the
   * upstream no longer accepts it: the token is forgotten and the caller gets the link again.
   */
  #receive(message: JsonRpcMessage, info?: ReceiveInfo): void {
    const handler = this.#onmessage
    if (
      this.#rejections.size === 0 ||
      !('id' in message) ||
      'method' in message ||
      message.id === null
    ) {
      handler?.(message, info)
      return
    }
    const key = String(message.id)
    const onRejected = this.#rejections.get(key)
    this.#rejections.delete(key)
    if (!onRejected || !('error' in message) || !isUnauthorized(message.error.data)) {
      handler?.(message, info)
      return
    }
    onRejected()
      .catch(() => undefined)
      .then((reply) => {
        if (!reply) return handler?.(message, info)
        const { code, message: text, data } = reply
        handler?.({ jsonrpc: '2.0', id: message.id, error: { code, message: text, data } }, info)
      })
  }
}

const MAX_TRACKED = 10_000

/** Whether an error reply's data says the upstream answered HTTP 401. */
function isUnauthorized(data: unknown): boolean {
  const d = data as { httpStatus?: unknown; details?: { httpStatus?: unknown } } | undefined
  return d?.httpStatus === 401 || d?.details?.httpStatus === 401
}
