/**
 * Requests Barbican sends to one client on an upstream's behalf (sampling, elicitation,
 * roots/list): Barbican's own ids toward the client, the wait for the answer with a deadline,
 * withdrawal when the upstream cancels, and release when the client goes away.
 */
import type { Codec } from '../protocol/codec.ts'
import {
  type JsonObject,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type JsonRpcResponse,
  METHOD_NOT_FOUND,
} from '../protocol/jsonrpc.ts'
import { hasCapability, methodSpec } from '../protocol/methods.ts'
import type { ErrorReply, Message } from '../protocol/model.ts'
import type { Revision } from '../protocol/revisions.ts'
import type { UpstreamReply } from '../upstreams/upstream-client.ts'

interface Pending {
  readonly resolve: (reply: UpstreamReply) => void
  readonly timer: NodeJS.Timeout
}

/**
 * Why an upstream's request cannot reach this client, as the reply the upstream gets: the
 * client did not declare the capability the method needs, or it has no session to carry a
 * request (a 2026-07-28 client, `revision` undefined). Undefined when it can be sent.
 */
export function clientRequestRefusal(
  request: JsonRpcRequest,
  clientCapabilities: JsonObject,
  revision: Revision | undefined,
): ErrorReply | undefined {
  const spec = methodSpec(request.method)
  if (spec?.gate?.side === 'client' && !hasCapability(clientCapabilities, spec.gate.path)) {
    return {
      kind: 'error',
      id: request.id,
      code: METHOD_NOT_FOUND,
      message: `The client did not declare the "${spec.gate.path.join('.')}" capability needed for ${request.method}`,
    }
  }
  if (revision === undefined) {
    return {
      kind: 'error',
      id: request.id,
      code: METHOD_NOT_FOUND,
      message: `${request.method} cannot reach a client of this session`,
    }
  }
  return undefined
}

/** How the requests reach the client and its answers come back. */
export interface ClientRequestsIo {
  /** Sends a message to the client, on the stream of `relatedRequestId` where there is one. */
  send(message: JsonRpcMessage, relatedRequestId: JsonRpcId | undefined): void
  /** Tells the client a request is withdrawn (`notifications/cancelled`). */
  cancel(id: string, relatedRequestId: JsonRpcId | undefined): void
  /** Decodes the client's answer with the session's codec. */
  decode(response: JsonRpcResponse): UpstreamReply
}

/** One session's requests to its client that are waiting for an answer. */
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

  /**
   * Relays an upstream's request to the client, encoded with `codec` under Barbican's own id,
   * and resolves with the answer under the upstream's id.
   */
  async relay(
    request: JsonRpcRequest,
    codec: Codec,
    relatedRequestId: JsonRpcId | undefined,
    signal?: AbortSignal,
  ): Promise<UpstreamReply> {
    const reply = await this.request(
      request.method,
      (id) =>
        codec.encode({
          kind: 'request',
          id,
          method: request.method,
          params: request.params,
        } satisfies Message),
      relatedRequestId,
      signal,
    )
    // The upstream expects the answer under its own request id.
    reply.id = request.id
    return reply
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
