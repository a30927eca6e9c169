/**
 * Where the account-link flow keeps its two short-lived, single-use records between requests
 * (docs/decisions/089): the ticket a link URL carries (`/link/NAME?ticket=`) and the OAuth state
 * the issuer sends back (`/oauth/callback?state=`). In one process they stay in memory; in a
 * fleet (Redis configured) they live in Redis, so the link page and the callback may land on any
 * replica. Each record is taken exactly once (GET and DEL in one script): a ticket or state used
 * on one replica is gone for all of them.
 *
 * In Redis a record is keyed by the SHA-256 of its id (the id is a bearer secret: whoever holds
 * it may continue the flow) and expires with its own TTL. A state holds no client secret and no
 * issuer metadata, only names (upstream, issuer, client id) looked up again at the callback; its
 * PKCE verifier is sealed (AES-256-GCM) with a key derived from the fleet's request-state key
 * (ADR 059) and bound to the state's digest, so a reader of Redis cannot redeem a code with it.
 */
import { createHash } from 'node:crypto'
import { type RedisClient, RedisScript, secretDigest } from '../store/redis.ts'
import { openSync, sealSync } from './secret-box.ts'

/** GET and DEL in one step (GETDEL, as a script so that Redis 6.0 serves it too). */
const TAKE = new RedisScript(
  "local v = redis.call('GET', KEYS[1]) if v then redis.call('DEL', KEYS[1]) end return v",
)

/** What a link URL's ticket stands for: a user, and the upstream to link. */
export interface LinkTicket {
  /** The Barbican identity key of the user (auth/request-identity.ts identityKey). */
  readonly user: string
  /** The user's subject, as the link page names them. */
  readonly subject: string
  readonly upstream: string
}

/** An authorization request under way, as the callback needs it. */
export interface LinkState {
  readonly user: string
  /** SHA-256 of the nonce in the cookie of the browser that opened the link page. */
  readonly browser: Buffer
  readonly upstream: string
  /** The issuer the request went to; the callback's metadata must name the same. */
  readonly issuer: string
  /** The client the authorization request named; the code is redeemed as that client. */
  readonly clientId: string
  /** The PKCE code verifier. */
  readonly verifier: string
}

export interface LinkFlowStore {
  putTicket(id: string, ticket: LinkTicket, ttlMs: number): Promise<void>
  /** The ticket, removed: undefined when unknown, already taken or expired. */
  takeTicket(id: string): Promise<LinkTicket | undefined>
  putState(id: string, state: LinkState, ttlMs: number): Promise<void>
  /** The state, removed: undefined when unknown, already taken or expired. */
  takeState(id: string): Promise<LinkState | undefined>
}

/** One process's flows (a single gateway): lost on restart, as before. */
export class MemoryLinkFlowStore implements LinkFlowStore {
  readonly #tickets = new Map<string, { value: LinkTicket; expires: number }>()
  readonly #states = new Map<string, { value: LinkState; expires: number }>()

  async putTicket(id: string, ticket: LinkTicket, ttlMs: number): Promise<void> {
    this.#sweep()
    this.#tickets.set(id, { value: ticket, expires: Date.now() + ttlMs })
  }

  async takeTicket(id: string): Promise<LinkTicket | undefined> {
    return take(this.#tickets, id)
  }

  async putState(id: string, state: LinkState, ttlMs: number): Promise<void> {
    this.#sweep()
    this.#states.set(id, { value: state, expires: Date.now() + ttlMs })
  }

  async takeState(id: string): Promise<LinkState | undefined> {
    return take(this.#states, id)
  }

  #sweep(): void {
    const now = Date.now()
    for (const [id, t] of this.#tickets) if (t.expires < now) this.#tickets.delete(id)
    for (const [id, s] of this.#states) if (s.expires < now) this.#states.delete(id)
  }
}

function take<T>(map: Map<string, { value: T; expires: number }>, id: string): T | undefined {
  const entry = map.get(id)
  map.delete(id)
  return entry === undefined || entry.expires < Date.now() ? undefined : entry.value
}

/** The key sealing verifiers in Redis: derived from the fleet's request-state key (ADR 059). */
export function linkStateKey(stateKey: Buffer): Buffer {
  return createHash('sha256').update('barbican link state\n').update(stateKey).digest()
}

/** The state as kept in Redis: names and a sealed verifier, nothing else. */
interface StoredState {
  readonly user: string
  readonly browser: string
  readonly upstream: string
  readonly issuer: string
  readonly clientId: string
  readonly verifier: string
}

/** A fleet's flows, in Redis under `<prefix>link:ticket:` and `<prefix>link:state:`. */
export class RedisLinkFlowStore implements LinkFlowStore {
  readonly #client: RedisClient
  readonly #prefix: string
  readonly #key: Buffer

  /** `key`: 32 bytes every replica has alike (linkStateKey of the request-state key). */
  constructor(client: RedisClient, prefix: string, key: Buffer) {
    if (key.length !== 32) throw new Error('The link state key must be 32 bytes')
    this.#client = client
    this.#prefix = prefix
    this.#key = key
  }

  async #take(key: string): Promise<string | undefined> {
    const value = await TAKE.run(this.#client, [key], [])
    return typeof value === 'string' ? value : undefined
  }

  async putTicket(id: string, ticket: LinkTicket, ttlMs: number): Promise<void> {
    const value = JSON.stringify({
      user: ticket.user,
      subject: ticket.subject,
      upstream: ticket.upstream,
    })
    await this.#client.set(`${this.#prefix}link:ticket:${secretDigest(id)}`, value, { PX: ttlMs })
  }

  async takeTicket(id: string): Promise<LinkTicket | undefined> {
    const text = await this.#take(`${this.#prefix}link:ticket:${secretDigest(id)}`)
    if (text === undefined) return undefined
    const t = JSON.parse(text) as Partial<LinkTicket>
    if (typeof t.user !== 'string' || typeof t.subject !== 'string') return undefined
    if (typeof t.upstream !== 'string') return undefined
    return { user: t.user, subject: t.subject, upstream: t.upstream }
  }

  async putState(id: string, state: LinkState, ttlMs: number): Promise<void> {
    const digest = secretDigest(id)
    const stored: StoredState = {
      user: state.user,
      browser: state.browser.toString('base64url'),
      upstream: state.upstream,
      issuer: state.issuer,
      clientId: state.clientId,
      verifier: sealSync(this.#key, state.verifier, verifierSlot(digest)),
    }
    await this.#client.set(`${this.#prefix}link:state:${digest}`, JSON.stringify(stored), {
      PX: ttlMs,
    })
  }

  async takeState(id: string): Promise<LinkState | undefined> {
    const digest = secretDigest(id)
    const text = await this.#take(`${this.#prefix}link:state:${digest}`)
    if (text === undefined) return undefined
    const s = JSON.parse(text) as Partial<StoredState>
    const fields = [s.user, s.browser, s.upstream, s.issuer, s.clientId, s.verifier]
    if (!fields.every((f) => typeof f === 'string')) return undefined
    let verifier: string
    try {
      verifier = openSync(this.#key, s.verifier!, verifierSlot(digest))
    } catch {
      // Sealed under another key (a replica with another BARBICAN_STATE_KEY), or tampered.
      return undefined
    }
    return {
      user: s.user!,
      browser: Buffer.from(s.browser!, 'base64url'),
      upstream: s.upstream!,
      issuer: s.issuer!,
      clientId: s.clientId!,
      verifier,
    }
  }
}

/** The slot a verifier is sealed for: a sealed verifier moved to another state does not open. */
function verifierSlot(digest: string): string {
  return `link-state:${digest}:verifier`
}
