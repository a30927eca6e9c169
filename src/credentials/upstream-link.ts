/**
 * One upstream's per-user OAuth credentials (ADR 089): the stored tokens of each user, refreshed
 * with rotation before they expire, one refresher at a time across the fleet. The link flow that
 * stores them first is oauth-link.ts.
 */

import { setTimeout as sleep } from 'node:timers/promises'
import type { AuditSink } from '../audit/audit-log.ts'
import type { AuthorizationServerMetadata, IssuerMetadataCache } from '../auth/as-metadata.ts'
import type { CredentialOutcome, CredentialSource } from '../auth/context.ts'
import type { Identity } from '../auth/identity.ts'
import { identityKey } from '../auth/request-identity.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { Logger } from '../telemetry/log.ts'
import type { ClientIdentity, ClientRegistrar } from './client-registration.ts'
import type { LinkFlowStore } from './link-flow-store.ts'
import {
  authorizationServer,
  discoverResourceIssuer,
  OAuthError,
  refreshTokens,
} from './oauth-client.ts'
import type { RefreshLocks } from './refresh-lock.ts'
import type { StoredTokens, TokenKey, TokenSet, TokenStore } from './token-store.ts'

/** Tokens this close to expiry are refreshed before use. */
const EXPIRY_MARGIN_MS = 30_000
/**
 * How long a replica holds a link's refresh lock at most: more than one token request may take
 * (the guarded fetch gives up after 10 s) plus storing the result.
 */
const REFRESH_LOCK_MS = 20_000
/** How long a replica waits for another one's refresh before the call fails (the link stays). */
const REFRESH_WAIT_MS = 12_000
/** How often a waiting replica looks at the stored tokens and the lock. */
const REFRESH_POLL_MS = 50

export interface OAuthLinkConfig {
  /** A client registered by hand; absent: a client metadata document or dynamic registration. */
  readonly clientId?: string | undefined
  readonly clientSecret?: string | undefined
  readonly scopes: readonly string[]
  /** Explicit issuer; discovered from the upstream's metadata when absent. */
  readonly issuer?: string | undefined
  /** RFC 8707 resource (default: the upstream URL). */
  readonly resource: string
}

export interface LinkDeps {
  readonly fetch: GuardedFetch
  readonly store: TokenStore
  readonly baseUrl: () => string
  readonly log: Logger
  /** Chooses (and registers, when needed) the client id presented to each server. */
  readonly clients: ClientRegistrar
  /** Where account links are recorded, when an audit log is open. */
  readonly audit?: (() => AuditSink | undefined) | undefined
  /** Where tickets and states wait between requests: Redis in a fleet; default this process. */
  readonly flows?: LinkFlowStore | undefined
  /** The fleet's refresh locks (Redis); absent: refreshes are one at a time per process only. */
  readonly locks?: RefreshLocks | undefined
  /** Issuers' metadata, memory then Redis (ADR 082); absent: each link discovers its own. */
  readonly metadata?: IssuerMetadataCache | undefined
}

/** One upstream's per-user OAuth credentials. */
export class UpstreamLink implements CredentialSource {
  readonly upstream: string
  readonly config: OAuthLinkConfig
  readonly #deps: LinkDeps
  readonly #ticketUrl: (identity: Identity) => Promise<string>
  #issuer: Promise<string> | undefined
  #metadata: Promise<AuthorizationServerMetadata> | undefined
  readonly #refreshing = new Map<string, Promise<TokenSet | undefined>>()

  constructor(
    upstream: string,
    config: OAuthLinkConfig,
    deps: LinkDeps,
    ticketUrl: (identity: Identity) => Promise<string>,
  ) {
    this.upstream = upstream
    this.config = config
    this.#deps = deps
    this.#ticketUrl = ticketUrl
  }

  /**
   * The issuer's validated metadata. With the gateway's IssuerMetadataCache (ADR 082) it is read
   * there (memory, then Redis, then the issuer; at most an hour old); the issuer of an upstream
   * named by its RFC 9728 metadata is found once per process. Without the cache, discovered once.
   * A failure is asked again next time.
   */
  metadata(): Promise<AuthorizationServerMetadata> {
    const cache = this.#deps.metadata
    if (cache === undefined) {
      this.#metadata ??= this.#issuerOnce().then((issuer) =>
        authorizationServer(issuer, this.#deps.fetch),
      )
      this.#metadata.catch(() => {
        this.#metadata = undefined
      })
      return this.#metadata
    }
    return this.#issuerOnce().then((issuer) =>
      authorizationServer(issuer, this.#deps.fetch, (i) => cache.get(i)),
    )
  }

  #issuerOnce(): Promise<string> {
    if (this.config.issuer !== undefined) return Promise.resolve(this.config.issuer)
    this.#issuer ??= discoverResourceIssuer(this.config.resource, this.#deps.fetch)
    this.#issuer.catch(() => {
      this.#issuer = undefined
    })
    return this.#issuer
  }

  /** The client to present at the issuer (configured, CIMD or registered). */
  client(metadata: AuthorizationServerMetadata): Promise<ClientIdentity> {
    return this.#deps.clients.clientFor(metadata, {
      upstream: this.upstream,
      clientId: this.config.clientId,
      clientSecret: this.config.clientSecret,
    })
  }

  async save(user: string, issuer: string, tokens: TokenSet): Promise<void> {
    await this.#deps.store.put({ user, upstream: this.upstream, issuer }, tokens)
  }

  async forUser(identity: Identity): Promise<CredentialOutcome> {
    const metadata = await this.metadata()
    const key: TokenKey = {
      user: identityKey(identity),
      upstream: this.upstream,
      issuer: metadata.issuer,
    }
    const stored = await this.#deps.store.read(key)
    let tokens = stored?.tokens
    if (tokens?.expiresAt !== undefined && tokens.expiresAt - EXPIRY_MARGIN_MS < Date.now()) {
      tokens = await this.#refresh(key, metadata, stored!)
    }
    if (!tokens) {
      return {
        linkRequired: {
          url: await this.#ticketUrl(identity),
          message: `Barbican needs you to link your ${this.upstream} account.`,
        },
      }
    }
    return { headers: { authorization: `Bearer ${tokens.accessToken}` } }
  }

  async rejected(identity: Identity): Promise<void> {
    const metadata = await this.metadata()
    await this.#deps.store.delete({
      user: identityKey(identity),
      upstream: this.upstream,
      issuer: metadata.issuer,
    })
    this.#deps.log.info('upstream refused a linked token; the user must link again', {
      upstream: this.upstream,
    })
  }

  /**
   * One refresh per link at a time: per process (concurrent calls share one), and in a fleet
   * per (user, upstream, issuer) across replicas through a Redis lock (ADR 089). A failed refresh
   * forgets the link (the user links again).
   */
  async #refresh(
    key: TokenKey,
    metadata: AuthorizationServerMetadata,
    stale: StoredTokens,
  ): Promise<TokenSet | undefined> {
    if (!stale.tokens.refreshToken) return await this.#forget(key, stale)
    const id = JSON.stringify(key)
    let running = this.#refreshing.get(id)
    if (!running) {
      const locks = this.#deps.locks
      running = (
        locks === undefined
          ? this.#refreshNow(key, metadata, stale)
          : this.#refreshLocked(locks, id, key, metadata, stale)
      ).finally(() => this.#refreshing.delete(id))
      this.#refreshing.set(id, running)
    }
    return await running
  }

  /**
   * Refreshes holding the fleet's lock of this link. A replica that finds it held waits for the
   * holder and takes the tokens it stored; the holder, once it has the lock, reads the store
   * again first, since the tokens it was given may have been refreshed meanwhile. Redis failing
   * falls back to refreshing without the lock (what one process did before; at worst the issuer
   * sees the rotated token twice and the user links again). The wait is bounded: past it the
   * call fails and the link is kept. A holder that outlives the lock (a paused process) is
   * fenced by the store itself: its write is conditional on the entry it read (#refreshNow).
   */
  async #refreshLocked(
    locks: RefreshLocks,
    name: string,
    key: TokenKey,
    metadata: AuthorizationServerMetadata,
    stale: StoredTokens,
  ): Promise<TokenSet | undefined> {
    const deadline = Date.now() + REFRESH_WAIT_MS
    for (;;) {
      let held: string | undefined
      try {
        held = await locks.acquire(name, REFRESH_LOCK_MS)
      } catch (error) {
        this.#deps.log.warn('refresh lock unavailable (Redis); refreshing without it', {
          upstream: this.upstream,
          error,
        })
        return await this.#refreshNow(key, metadata, stale)
      }
      if (held !== undefined) {
        try {
          const current = await this.#deps.store.read(key)
          if (current === undefined) return undefined
          if (current.tokens.accessToken !== stale.tokens.accessToken) return current.tokens
          return await this.#refreshNow(key, metadata, current)
        } finally {
          await locks.release(name, held).catch((error: unknown) => {
            // It expires by itself within REFRESH_LOCK_MS.
            this.#deps.log.warn('refresh lock not released', { upstream: this.upstream, error })
          })
        }
      }
      // Another replica is refreshing: its tokens (or its forgetting the link) will be stored.
      await sleep(REFRESH_POLL_MS)
      const current = await this.#deps.store.get(key)
      if (current === undefined) return undefined
      if (current.accessToken !== stale.tokens.accessToken) return current
      if (Date.now() > deadline) {
        throw new Error(
          `Another replica's refresh of the ${this.upstream} token did not finish in time`,
        )
      }
    }
  }

  /**
   * Asks the issuer for new tokens and stores them; on failure forgets the link. Both writes are
   * fenced (ADR 089): they happen only if the link still holds the entry `stored` was read from.
   * Otherwise another replica refreshed (or the user linked again) while this one held a lock
   * that had expired, and what it stored stands: this one reads it instead.
   */
  async #refreshNow(
    key: TokenKey,
    metadata: AuthorizationServerMetadata,
    stored: StoredTokens,
  ): Promise<TokenSet | undefined> {
    let next: TokenSet
    try {
      const client = await this.client(metadata)
      try {
        next = await refreshTokens(
          metadata,
          client,
          stored.tokens,
          this.config.resource,
          this.#deps.fetch,
        )
      } catch (err) {
        if (isClientRejection(err)) await this.#deps.clients.rejected(metadata.issuer, client)
        throw err
      }
    } catch (err) {
      this.#deps.log.info('upstream token refresh failed; the user must link again', {
        upstream: this.upstream,
        error: err,
      })
      return await this.#forget(key, stored)
    }
    if (await this.#deps.store.replace(key, stored.version, next)) return next
    this.#deps.log.info('upstream token refreshed meanwhile by another holder; using theirs', {
      upstream: this.upstream,
    })
    return await this.#deps.store.get(key)
  }

  /** Forgets the link unless it changed since `stored` was read; then what it holds now. */
  async #forget(key: TokenKey, stored: StoredTokens): Promise<TokenSet | undefined> {
    if (await this.#deps.store.forget(key, stored.version)) return undefined
    return await this.#deps.store.get(key)
  }
}

/** The server no longer knows or accepts the client (RFC 6749 §5.2, §4.1.2.1). */
export function isClientRejection(err: unknown): boolean {
  return (
    err instanceof OAuthError &&
    (err.error === 'invalid_client' || err.error === 'unauthorized_client')
  )
}
