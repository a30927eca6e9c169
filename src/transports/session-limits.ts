/**
 * Bounds on the live sessions of one inbound transport (Streamable HTTP sessions, legacy SSE
 * streams, WebSocket connections): at most `maxSessionsPerIdentity` per owner, at most
 * `maxSessions` in all. When a new session would break a bound, the least recently active idle
 * session is evicted to make room (one of the same owner for the per-owner bound), so one caller
 * opening many sessions pushes out its own old ones and never locks out anyone else. Only when
 * every session in the way is working on a request is the new one refused.
 *
 * The owner is the verified identity when inbound auth is on, else the client's address.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { identityKey, requestIdentity } from '../auth/request-identity.ts'
import type { Logger } from '../telemetry/log.ts'
import { sendRpcError } from './http-io.ts'

/** The two bounds, from `limits.maxSessions` and `limits.maxSessionsPerIdentity`. */
export interface SessionLimitOptions {
  readonly maxSessions: number
  readonly maxSessionsPerIdentity: number
}

/** How the limiter reads and ends one transport's sessions. */
export interface SessionAccess<S> {
  /** A session working on a request is never evicted. */
  readonly idle: (session: S) => boolean
  /** When the client last sent something (ms since the epoch); the oldest goes first. */
  readonly lastActivity: (session: S) => number
  /** Closes an evicted session, telling the client why where the transport can. */
  readonly evict: (session: S, bound: keyof SessionLimitOptions) => void
}

export type Admission =
  | { readonly ok: true }
  | { readonly ok: false; readonly status: 429 | 503; readonly reason: string }

/**
 * Who a session counts against: the identity inbound auth verified for the request (the same key
 * that binds a session to its caller), or, without auth, the client's address.
 */
export function sessionOwner(req: IncomingMessage): string {
  const identity = requestIdentity(req)
  if (identity !== undefined) return identityKey(identity)
  return `address:${req.socket.remoteAddress ?? 'unknown'}`
}

/**
 * Admits a new session opened by an HTTP request (Streamable HTTP, legacy SSE): returns its owner,
 * to pass to `add`, or answers the refusal (429/503 with Retry-After) and returns undefined.
 * WebSocket refuses on the raw upgrade socket instead, so it calls `admit` itself.
 */
export function admitHttpSession<S>(
  limits: SessionLimits<S>,
  req: IncomingMessage,
  res: ServerResponse,
): string | undefined {
  const owner = sessionOwner(req)
  const admission = limits.admit(owner)
  if (!admission.ok) {
    sendRpcError(res, admission.status, admission.reason, { headers: { 'retry-after': '5' } })
    return undefined
  }
  return owner
}

/** The live sessions of one transport, by owner, within the bounds. */
export class SessionLimits<S> {
  readonly #options: SessionLimitOptions
  readonly #access: SessionAccess<S>
  readonly #kind: string
  readonly #log: Logger
  readonly #byOwner = new Map<string, Set<S>>()
  readonly #owners = new Map<S, string>()

  constructor(options: SessionLimitOptions, access: SessionAccess<S>, kind: string, log: Logger) {
    this.#options = options
    this.#access = access
    this.#kind = kind
    this.#log = log
  }

  /** Live sessions counted. */
  get size(): number {
    return this.#owners.size
  }

  /** Live sessions of `owner`. */
  countOf(owner: string): number {
    return this.#byOwner.get(owner)?.size ?? 0
  }

  /**
   * Makes room for one more session of `owner`: evicts the oldest idle session of that owner
   * when it is at its bound, then the oldest idle session of anyone when the transport is at
   * its bound. Refuses (429 for the owner's bound, 503 for the total) only when no session in
   * the way is idle. Call `add` right after a successful admission.
   */
  admit(owner: string): Admission {
    const own = this.#byOwner.get(owner)
    if (own !== undefined && own.size >= this.#options.maxSessionsPerIdentity) {
      if (!this.#evictOldestIdle(own, 'maxSessionsPerIdentity')) {
        return {
          ok: false,
          status: 429,
          reason: 'Too many sessions for this caller, all of them busy',
        }
      }
    }
    if (this.#owners.size >= this.#options.maxSessions) {
      if (!this.#evictOldestIdle(this.#owners.keys(), 'maxSessions')) {
        return { ok: false, status: 503, reason: 'Too many sessions' }
      }
    }
    return { ok: true }
  }

  add(owner: string, session: S): void {
    let own = this.#byOwner.get(owner)
    if (own === undefined) {
      own = new Set()
      this.#byOwner.set(owner, own)
    }
    own.add(session)
    this.#owners.set(session, owner)
  }

  /** Forgets a session that ended; idempotent. */
  remove(session: S): void {
    const owner = this.#owners.get(session)
    if (owner === undefined) return
    this.#owners.delete(session)
    const own = this.#byOwner.get(owner)
    own?.delete(session)
    if (own?.size === 0) this.#byOwner.delete(owner)
  }

  /** Evicts the least recently active idle session among `candidates`; false when none is idle. */
  #evictOldestIdle(candidates: Iterable<S>, bound: keyof SessionLimitOptions): boolean {
    let oldest: S | undefined
    let oldestActivity = Number.POSITIVE_INFINITY
    for (const session of candidates) {
      if (!this.#access.idle(session)) continue
      const activity = this.#access.lastActivity(session)
      if (activity < oldestActivity) {
        oldest = session
        oldestActivity = activity
      }
    }
    if (oldest === undefined) {
      this.#log.warn(`refusing a new ${this.#kind} session: ${bound} reached, none idle`, {
        [bound]: this.#options[bound],
      })
      return false
    }
    this.#log.info(`evicting the oldest idle ${this.#kind} session: ${bound} reached`, {
      [bound]: this.#options[bound],
      idleMs: Date.now() - oldestActivity,
    })
    this.remove(oldest)
    this.#access.evict(oldest, bound)
    return true
  }
}
