/**
 * A JSON-RPC client over one outbound Transport: Barbican's side of one upstream connection.
 *
 * Every request gets an id from this client's own counter, so ids from different client
 * sessions can never collide on the upstream hop; the caller keeps its own id and maps the
 * answer back. Requests time out, abort on their caller's signal (sending
 * `notifications/cancelled` upstream), and fail at once when the connection closes.
 */

import type { Caller } from '../auth/context.ts'
import type { ClientRequester } from '../bridge/held-call.ts'
import { BarbicanError, upstreamClosed } from '../common/errors.ts'
import { DEFAULT_LIMITS } from '../config/defaults.ts'
import type { Codec } from '../protocol/codec.ts'
import { codecFor } from '../protocol/codecs.ts'
import {
  INTERNAL_ERROR,
  type JsonObject,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcNotification,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import type { Revision } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import { LostReplyFault } from '../transports/outbound-payload.ts'
import type { ReceiveInfo, SendOptions, Transport } from '../transports/transport.ts'

/** What the upstream answered: a neutral result or error reply (upstream errors pass through). */
export type UpstreamReply = Result | ErrorReply

/**
 * The owner recorded on a request sent on a client's behalf: where upstream→client requests made
 * while it is in flight go back to (docs/decisions/005), and who the call is for (read by the
 * tool-call context stamp, src/auth/context.ts).
 */
export interface CallOwner {
  /** The client's session, or a held call standing in for a 2026-07-28 client between rounds. */
  readonly session: ClientRequester
  readonly requestId: JsonRpcId
  /** The client's caller; a held call keeps the one of the request that started it. */
  readonly caller: Caller
  /**
   * The W3C trace context of this upstream request's own span, when tracing is on: the stamp
   * (auth/context.ts) passes it on as is instead of making up a span id of its own.
   */
  readonly traceparent?: string | undefined
}

export interface RequestOptions {
  readonly signal?: AbortSignal | undefined
  readonly timeoutMs?: number | undefined
  /** Extra send options for the transport (e.g. HTTP headers of the 2026 hop). */
  readonly send?: SendOptions | undefined
  /** The client's call this request is made for; absent for Barbican's own requests. */
  readonly owner?: CallOwner | undefined
}

export interface UpstreamClientEvents {
  /** A notification from the upstream (progress, list_changed, logging, …). */
  onNotification?: (notification: JsonRpcNotification) => void
  /**
   * A request from the upstream (sampling, elicitation, roots/list, ping). `owners` lists the
   * owners of the requests in flight that it may belong to (exactly one when attributable).
   */
  onRequest?: (request: JsonRpcRequest, owners: readonly CallOwner[]) => Promise<UpstreamReply>
  onClose?: () => void
}

/**
 * Where a request this client sends carries its owner: a symbol-keyed member, which
 * serialisation (JSON.stringify) and structured cloning leave out. A WeakMap did the same job
 * at ten times the cost per call (docs/performance.md).
 */
const OWNER: unique symbol = Symbol('barbican.requestOwner')

/**
 * The owner (the client session) of a request this client is sending, for transports that act
 * on whose behalf a request is made (auth/context.ts stamps the caller's context this way).
 */
export function requestOwner(message: JsonRpcMessage): unknown {
  return (message as { [OWNER]?: unknown })[OWNER]
}

/**
 * One request in flight. It is its own abort listener (`handleEvent`), and its deadline is
 * watched by its client's one timer (see `#armSweep`), so a call allocates no closure or timer.
 */
class Pending {
  readonly client: UpstreamClient
  readonly id: number
  readonly method: string
  readonly owner: CallOwner | undefined
  readonly timeoutMs: number
  readonly signal: AbortSignal | undefined
  readonly resolve: (reply: UpstreamReply) => void
  readonly reject: (error: Error) => void
  /** performance.now() past which it times out. */
  readonly deadline: number
  /** The progress token it carries, if any: its progress notifications count as its output. */
  progressToken: string | number | undefined
  /** Bytes the upstream sent for it so far (progress notifications). */
  outputBytes = 0

  constructor(
    client: UpstreamClient,
    id: number,
    method: string,
    options: RequestOptions,
    timeoutMs: number,
    resolve: (reply: UpstreamReply) => void,
    reject: (error: Error) => void,
  ) {
    this.client = client
    this.id = id
    this.method = method
    this.owner = options.owner
    this.timeoutMs = timeoutMs
    this.signal = options.signal
    this.resolve = resolve
    this.reject = reject
    this.deadline = performance.now() + timeoutMs
  }

  cleanup(): void {
    this.signal?.removeEventListener('abort', this)
    if (this.progressToken !== undefined) this.client.forgetProgress(this)
  }

  /** The caller's signal aborted. */
  handleEvent(): void {
    this.client.settleAbandoned(
      this,
      'cancelled by the client',
      new BarbicanError('ERR_CANCELLED', 'Request cancelled'),
    )
  }
}

const ONCE = Object.freeze({ once: true })

/** How many tokens of requests failed for their output are remembered (their progress dropped). */
const MAX_SPENT_TOKENS = 64

export class UpstreamClient {
  readonly name: string
  #transport: Transport
  #log: Logger
  #nextId = 1
  #pending = new Map<number, Pending>()
  /** The one timer watching deadlines, and the time it is due (performance.now()). */
  #sweepTimer: NodeJS.Timeout | undefined
  #sweepAt = Number.POSITIVE_INFINITY
  readonly #sweepNow = () => this.#sweep()
  #closed = false
  #defaultTimeoutMs: number
  #codec: Codec
  #events: UpstreamClientEvents
  readonly #maxCallOutputBytes: number
  /** Requests in flight that carry a progress token, by token. */
  readonly #byProgressToken = new Map<string | number, Pending>()
  /**
   * Tokens of requests failed for their output: what the server still sends for them is
   * dropped, not relayed. The last MAX_SPENT_TOKENS only (a flood is stopped at its start).
   */
  readonly #spentTokens = new Set<string | number>()

  constructor(
    name: string,
    transport: Transport,
    options: {
      log: Logger
      timeoutMs: number
      revision: Revision
      events?: UpstreamClientEvents
      /** Most bytes the upstream may send for one request (default 16 MiB). */
      maxCallOutputBytes?: number | undefined
    },
  ) {
    this.name = name
    this.#maxCallOutputBytes =
      options.maxCallOutputBytes ?? DEFAULT_LIMITS.upstreamMaxCallOutputBytes
    this.#transport = transport
    this.#log = options.log
    this.#defaultTimeoutMs = options.timeoutMs
    this.#codec = codecFor(options.revision)
    this.#events = options.events ?? {}
    transport.onmessage = (message, info) => this.#receive(message, info)
    transport.onclose = () => this.#onClose()
    transport.onerror = (error) => {
      this.#log.warn('upstream transport error', { error })
      if (error instanceof LostReplyFault) this.#replyLost(error)
    }
  }

  get closed(): boolean {
    return this.#closed
  }

  /** The revision spoken on this connection; set once the handshake has chosen it. */
  setRevision(revision: Revision): void {
    this.#codec = codecFor(revision)
    // Streamable HTTP sends the negotiated revision in MCP-Protocol-Version on every request.
    this.#transport.setProtocolVersion?.(revision)
  }

  get inFlight(): number {
    return this.#pending.size
  }
  /** Why the upstream went away on its own, when its transport knows (a stdio exit report). */
  get closeError(): Error | undefined {
    return this.#transport.closeError
  }

  async request(method: string, params: JsonObject | undefined, options: RequestOptions = {}) {
    if (this.#closed) {
      throw this.closeError ?? upstreamClosed(this.name, 'is not connected')
    }
    const { signal } = options
    if (signal?.aborted) throw new BarbicanError('ERR_CANCELLED', 'Request cancelled')
    const id = this.#nextId++
    const timeoutMs = options.timeoutMs ?? this.#defaultTimeoutMs
    const message: JsonRpcRequest =
      params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params }

    let pending!: Pending
    const reply = new Promise<UpstreamReply>((resolve, reject) => {
      pending = new Pending(this, id, method, options, timeoutMs, resolve, reject)
    })
    signal?.addEventListener('abort', pending, ONCE)
    this.#pending.set(id, pending)
    const token = (params?._meta as { progressToken?: unknown } | undefined)?.progressToken
    if (typeof token === 'string' || typeof token === 'number') {
      pending.progressToken = token
      this.#byProgressToken.set(token, pending)
    }
    if (pending.deadline < this.#sweepAt) this.#armSweep(pending.deadline)
    else if (this.#pending.size === 1) this.#sweepTimer?.ref()
    if (options.owner !== undefined) (message as { [OWNER]?: unknown })[OWNER] = options.owner
    this.#transport.send(message, options.send).then(undefined, (err: unknown) => {
      if (!this.#pending.delete(id)) return
      this.#idleSweep()
      pending.cleanup()
      // Barbican's own errors explain themselves to the client; anything else is a fault of
      // Barbican's, named in the log line of the call (its cause) and not to the client.
      const reason = err instanceof BarbicanError ? err.message : 'internal error'
      pending.reject(
        new BarbicanError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `Cannot send to upstream "${this.name}": ${reason}`,
          { cause: err },
        ),
      )
    })
    return await reply
  }

  /**
   * Ends a request the caller gave up on (its signal aborted, or it timed out): it fails with
   * `error`, and the upstream is told to stop working on it. No-op once it was settled.
   */
  settleAbandoned(pending: Pending, reason: string, error: Error): void {
    if (this.#pending.get(pending.id) !== pending) return
    this.#pending.delete(pending.id)
    this.#idleSweep()
    pending.cleanup()
    this.#cancelUpstream(pending.id, reason)
    pending.reject(error)
  }

  /** A request that carried a progress token is settled: its progress counts no more. */
  forgetProgress(pending: Pending): void {
    const token = pending.progressToken
    if (token !== undefined && this.#byProgressToken.get(token) === pending) {
      this.#byProgressToken.delete(token)
    }
  }

  /**
   * Counts `bytes` the upstream sent for `pending`; past `limits.upstreamMaxCallOutputBytes`
   * the request fails naming the limit and the upstream is told to cancel it. True when it did.
   */
  #overOutput(pending: Pending, bytes: number): boolean {
    pending.outputBytes += bytes
    if (pending.outputBytes <= this.#maxCallOutputBytes) return false
    if (pending.progressToken !== undefined) {
      this.#spentTokens.add(pending.progressToken)
      if (this.#spentTokens.size > MAX_SPENT_TOKENS) {
        this.#spentTokens.delete(this.#spentTokens.values().next().value!)
      }
    }
    this.settleAbandoned(
      pending,
      'output limit',
      new BarbicanError(
        'ERR_UPSTREAM_OUTPUT_LIMIT',
        `Upstream "${this.name}" sent ${pending.outputBytes} bytes for ${pending.method}, past ` +
          `limits.upstreamMaxCallOutputBytes (${this.#maxCallOutputBytes}); the request was cancelled`,
        {
          data: {
            limit: 'upstreamMaxCallOutputBytes',
            maxCallOutputBytes: this.#maxCallOutputBytes,
          },
        },
      ),
    )
    return true
  }

  async notify(method: string, params?: JsonObject): Promise<void> {
    if (this.#closed) return
    const message: JsonRpcNotification =
      params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params }
    await this.#transport.send(message)
  }

  /** Closes the connection; every request in flight fails with ERR_UPSTREAM_CLOSED. */
  async close(): Promise<void> {
    if (this.#closed) return
    await this.#transport.close()
    this.#onClose()
  }

  #cancelUpstream(id: number, reason: string): void {
    this.notify('notifications/cancelled', { requestId: id, reason }).catch(() => {})
  }

  #receive(message: JsonRpcMessage, info?: ReceiveInfo): void {
    if ('method' in message) {
      if ('id' in message) {
        this.#answerUpstreamRequest(message)
      } else {
        if (
          info?.bytes !== undefined &&
          (this.#byProgressToken.size > 0 || this.#spentTokens.size > 0) &&
          message.method === 'notifications/progress'
        ) {
          const token = (message.params as { progressToken?: unknown } | undefined)
            ?.progressToken as string | number
          const pending = this.#byProgressToken.get(token)
          // Past the bound, the request has failed: its further progress is dropped.
          if (pending !== undefined && this.#overOutput(pending, info.bytes)) return
          if (pending === undefined && this.#spentTokens.has(token)) return
        }
        this.#events.onNotification?.(message)
      }
      return
    }
    const id = message.id
    const pending = typeof id === 'number' ? this.#pending.get(id) : undefined
    if (!pending || typeof id !== 'number') {
      this.#log.debug('response for no pending request', { id })
      return
    }
    if (info?.bytes !== undefined && this.#overOutput(pending, info.bytes)) return
    this.#pending.delete(id)
    this.#idleSweep()
    pending.cleanup()
    pending.resolve(this.#codec.decode(message) as UpstreamReply)
  }

  /**
   * The upstream answered a request with a reply that cannot be used (beyond a limit): that
   * request fails now, saying why, and the connection goes on serving the others.
   */
  #replyLost(fault: LostReplyFault): void {
    const id = fault.requestId
    const pending = typeof id === 'number' ? this.#pending.get(id) : undefined
    if (!pending || typeof id !== 'number') return
    this.#pending.delete(id)
    this.#idleSweep()
    pending.cleanup()
    pending.reject(
      new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream "${this.name}" sent an unusable reply to ${pending.method}: ${fault.reason}`,
        { cause: fault },
      ),
    )
  }

  #answerUpstreamRequest(request: JsonRpcRequest): void {
    const owners = new Set<CallOwner>()
    for (const p of this.#pending.values()) if (p.owner !== undefined) owners.add(p.owner)
    const handler = this.#events.onRequest
    const reply: Promise<UpstreamReply> = handler
      ? handler(request, [...owners])
      : Promise.resolve({
          kind: 'error',
          id: request.id,
          code: -32601,
          message: `Method not found: ${request.method}`,
        })
    reply
      .catch(
        (err: unknown): UpstreamReply => ({
          kind: 'error',
          id: request.id,
          code: err instanceof BarbicanError ? -32603 : INTERNAL_ERROR,
          message: err instanceof Error ? err.message : 'Internal error',
        }),
      )
      .then((answer) => {
        answer.id = request.id as JsonRpcId
        return this.#transport.send(this.#codec.encode(answer), { relatedRequestId: request.id })
      })
      .catch((error: unknown) => this.#log.warn('cannot answer upstream request', { error }))
  }

  #onClose(): void {
    if (this.#closed) return
    this.#closed = true
    const error = this.closeError ?? upstreamClosed(this.name, 'closed the connection')
    for (const pending of this.#pending.values()) {
      pending.cleanup()
      pending.reject(error)
    }
    this.#pending.clear()
    clearTimeout(this.#sweepTimer)
    this.#sweepTimer = undefined
    this.#sweepAt = Number.POSITIVE_INFINITY
    this.#events.onClose?.()
  }

  /**
   * With nothing in flight the deadline timer stays armed but no longer keeps the process
   * alive (as the per-request timers it replaces did not once cleared); `request` refs it again.
   */
  #idleSweep(): void {
    if (this.#pending.size === 0) this.#sweepTimer?.unref()
  }

  /** (Re)arms the deadline timer for `at` (performance.now()). */
  #armSweep(at: number): void {
    clearTimeout(this.#sweepTimer)
    this.#sweepAt = at
    this.#sweepTimer = setTimeout(this.#sweepNow, Math.max(1, Math.ceil(at - performance.now())))
  }

  /**
   * Times out every request past its deadline, then arms the timer for the earliest deadline
   * left. Requests are answered long before their deadline as a rule, so this runs about once
   * per timeout period and looks at the requests then in flight.
   */
  #sweep(): void {
    this.#sweepTimer = undefined
    this.#sweepAt = Number.POSITIVE_INFINITY
    const now = performance.now()
    let next = Number.POSITIVE_INFINITY
    for (const pending of [...this.#pending.values()]) {
      if (pending.deadline > now) {
        if (pending.deadline < next) next = pending.deadline
        continue
      }
      this.settleAbandoned(
        pending,
        'timeout',
        new BarbicanError(
          'ERR_UPSTREAM_TIMEOUT',
          `Upstream "${this.name}" did not answer ${pending.method} within ${pending.timeoutMs} ms`,
        ),
      )
    }
    if (next !== Number.POSITIVE_INFINITY && !this.#closed) this.#armSweep(next)
  }
}
