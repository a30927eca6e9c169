/**
 * Requests Barbican sends to one client on an upstream's behalf (sampling, elicitation,
 * roots/list): Barbican's own ids toward the client, the wait for the answer with a deadline,
 * withdrawal when the upstream cancels, and release when the client goes away.
 */
import type { JsonRpcId, JsonRpcMessage, JsonRpcResponse } from './protocol/jsonrpc.ts'
import type { ErrorReply } from './protocol/model.ts'
import type { UpstreamReply } from './upstreams/upstream-client.ts'

interface Pending {
  readonly resolve: (reply: UpstreamReply) => void
  readonly timer: NodeJS.Timeout
}

export interface ClientRequestsIo {
  /** Sends a message to the client, on the stream of `relatedRequestId` where there is one. */
  send(message: JsonRpcMessage, relatedRequestId: JsonRpcId | undefined): void
  /** Tells the client a request is withdrawn (`notifications/cancelled`). */
  cancel(id: string, relatedRequestId: JsonRpcId | undefined): void
  /** Decodes the client's answer with the session's codec. */
  decode(response: JsonRpcResponse): UpstreamReply
}

export class ClientRequests {
  #pending = new Map<string, Pending>()
  #next = 1
  #io: ClientRequestsIo
  #timeoutMs: number

  constructor(io: ClientRequestsIo, timeoutMs: number) {
    this.#io = io
    this.#timeoutMs = timeoutMs
  }

  /**
   * Sends the request built by `encode` (given Barbican's id for it) and resolves with the
   * client's answer, or with an error reply on timeout, withdrawal or disconnect; never rejects.
   */
  async request(
    method: string,
    encode: (id: string) => JsonRpcMessage,
    relatedRequestId: JsonRpcId | undefined,
    signal?: AbortSignal,
  ): Promise<UpstreamReply> {
    const id = `barbican-${this.#next++}`
    return await new Promise<UpstreamReply>((resolve) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id)
        resolve(failure(id, `The client did not answer ${method} within ${this.#timeoutMs} ms`))
      }, this.#timeoutMs)
      this.#pending.set(id, { resolve, timer })
      // The upstream withdrew its request: tell the client, and stop waiting for it.
      signal?.addEventListener(
        'abort',
        () => {
          if (!this.#pending.delete(id)) return
          clearTimeout(timer)
          this.#io.cancel(id, relatedRequestId)
          resolve(failure(id, 'Cancelled'))
        },
        { once: true },
      )
      this.#io.send(encode(id), relatedRequestId)
    })
  }

  /** Delivers a client's response; false when it answers nothing Barbican asked. */
  answer(response: JsonRpcResponse): boolean {
    const key = String(response.id)
    const pending = this.#pending.get(key)
    if (!pending) return false
    this.#pending.delete(key)
    clearTimeout(pending.timer)
    pending.resolve(this.#io.decode(response))
    return true
  }

  /** The client went away: every open request ends with an error. */
  closeAll(): void {
    for (const [id, pending] of this.#pending) {
      clearTimeout(pending.timer)
      pending.resolve(failure(id, 'The client disconnected'))
    }
    this.#pending.clear()
  }
}

function failure(id: string, message: string): ErrorReply {
  return { kind: 'error', id, code: -32603, message }
}
