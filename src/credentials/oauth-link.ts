/**
 * Linking a user's account at an upstream's authorization server, and using it afterwards.
 * When a user calls an upstream they have not linked, the call is answered with a URL (URL-mode
 * elicitation, or a precise error carrying it) to `/link/UPSTREAM?ticket=…`: a short-lived,
 * single-use ticket bound to that user. The page there names the user the link is for, binds
 * the flow to the browser that opened it (a cookie, link-browser.ts) and starts an authorization
 * code flow with PKCE; `/oauth/callback` checks that browser, state and `iss`, redeems the code
 * and stores the tokens under (user, upstream, issuer). Later calls carry the stored access token, refreshed (with rotation)
 * when it expires. The client's own token plays no part in any of it. The `client_id` Barbican
 * presents is configured, its client metadata document, or registered dynamically
 * (client-registration.ts).
 */

import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import type { AuditSink } from '../audit/audit-log.ts'
import type { AuthorizationServerMetadata, IssuerMetadataCache } from '../auth/as-metadata.ts'
import type { CredentialOutcome, CredentialSource } from '../auth/context.ts'
import type { Identity } from '../auth/identity.ts'
import { identityKey } from '../auth/request-identity.ts'
import type { ErrorCode } from '../common/errors.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { Logger } from '../telemetry/log.ts'
import {
  CLIENT_DOCUMENT_PATH,
  clientDocument,
  clientDocumentUrl,
  type RouteHandler,
  serveClientDocument,
} from './client-metadata-document.ts'
import {
  type ClientIdentity,
  type ClientRegistrar,
  ClientRegistrationError,
} from './client-registration.ts'
import { bindBrowser, clearBrowserBinding, isSameBrowser } from './link-browser.ts'
import { type LinkFlowStore, MemoryLinkFlowStore } from './link-flow-store.ts'
import { page } from './link-page.ts'
import {
  authorizationServer,
  authorizationUrl,
  checkResponseIssuer,
  discoverResourceIssuer,
  OAuthError,
  pkcePair,
  refreshTokens,
  tokenRequest,
} from './oauth-client.ts'
import type { RefreshLocks } from './refresh-lock.ts'
import type { StoredTokens, TokenKey, TokenSet, TokenStore } from './token-store.ts'

/** Where the upstream's issuer sends the browser back. */
export const CALLBACK_PATH = '/oauth/callback'
/** Prefix of the per-upstream link pages (`/link/NAME`). */
export const LINK_PATH = '/link/'
/** The stable code a link page names when the shared store of tickets and states fails. */
const STORE_UNAVAILABLE: ErrorCode = 'ERR_STORE_UNAVAILABLE'

const TICKET_TTL_MS = 10 * 60_000
const STATE_TTL_MS = 10 * 60_000
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

/** Every linkable upstream of a gateway, with the two HTTP endpoints they share. */
export class LinkRegistry {
  readonly #deps: LinkDeps
  readonly #links = new Map<string, UpstreamLink>()
  readonly #flows: LinkFlowStore

  constructor(deps: LinkDeps) {
    this.#deps = deps
    this.#flows = deps.flows ?? new MemoryLinkFlowStore()
  }

  /** Registers an upstream with `oauth` credentials; returns its credential source. */
  add(upstream: string, config: OAuthLinkConfig): CredentialSource {
    const link = new UpstreamLink(upstream, config, this.#deps, (identity) =>
      this.#ticketUrl(upstream, identity),
    )
    this.#links.set(upstream, link)
    return link
  }

  /** Exact paths → handlers, for the HTTP listener's route table. */
  routes(): Map<string, RouteHandler> {
    const routes = new Map<string, RouteHandler>()
    for (const [name, link] of this.#links) {
      routes.set(`${LINK_PATH}${encodeURIComponent(name)}`, (req, res) =>
        this.#start(name, req, res),
      )
      if (link.config.clientId === undefined) {
        routes.set(`${CLIENT_DOCUMENT_PATH}${encodeURIComponent(name)}`, async (_req, res) =>
          serveClientDocument(res, this.#document(name, link.config)),
        )
      }
    }
    routes.set(CALLBACK_PATH, (req, res) => this.#callback(req, res))
    return routes
  }

  /** The upstream's client metadata document, while the public URL is https. */
  #document(upstream: string, config: OAuthLinkConfig): Record<string, unknown> | undefined {
    const base = this.#deps.baseUrl()
    const url = clientDocumentUrl(base, upstream)
    if (url === undefined) return undefined
    return clientDocument(url, base, `${base}${CALLBACK_PATH}`, config.scopes)
  }

  async #ticketUrl(upstream: string, identity: Identity): Promise<string> {
    const ticket = randomBytes(24).toString('base64url')
    await this.#flows.putTicket(
      ticket,
      { user: identityKey(identity), subject: identity.subject, upstream },
      TICKET_TTL_MS,
    )
    return `${this.#deps.baseUrl()}${LINK_PATH}${encodeURIComponent(upstream)}?ticket=${ticket}`
  }

  /** The link page: consumes the ticket and offers the way to the issuer's consent screen. */
  async #start(upstream: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x')
    const id = url.searchParams.get('ticket') ?? ''
    let ticket: Awaited<ReturnType<LinkFlowStore['takeTicket']>>
    try {
      ticket = id === '' ? undefined : await this.#flows.takeTicket(id)
    } catch (err) {
      return this.#unavailable(res, upstream, err)
    }
    if (!ticket || ticket.upstream !== upstream) {
      return page(
        res,
        400,
        'Link expired',
        'This link is unknown, used or expired. Call the tool again for a new one.',
      )
    }
    const link = this.#links.get(upstream)!
    try {
      const metadata = await link.metadata()
      const client = await link.client(metadata)
      const { verifier, challenge } = pkcePair()
      const state = randomBytes(24).toString('base64url')
      const binding = bindBrowser(state, this.#cookieScope())
      try {
        await this.#flows.putState(
          state,
          {
            user: ticket.user,
            browser: binding.hash,
            upstream,
            issuer: metadata.issuer,
            clientId: client.clientId,
            verifier,
          },
          STATE_TTL_MS,
        )
      } catch (err) {
        // Not the issuer: the shared store failed, after the ticket was spent (ADR 089).
        this.#deps.log.warn('account link store unavailable; the ticket is spent', {
          upstream,
          error: err,
        })
        return page(
          res,
          503,
          'Link failed',
          `Barbican cannot keep this sign-in's state: its shared state store cannot be reached ` +
            `right now (${STORE_UNAVAILABLE}). This link is used up: call the tool again for a ` +
            'new one.',
        )
      }
      const target = authorizationUrl(metadata, {
        clientId: client.clientId,
        redirectUri: `${this.#deps.baseUrl()}${CALLBACK_PATH}`,
        scopes: link.config.scopes,
        resource: link.config.resource,
        state,
        challenge,
      })
      page(
        res,
        200,
        `Link ${upstream}`,
        `This link is for the Barbican user ${ticket.subject}: Barbican will act as ` +
          `${ticket.subject} at ${upstream}. Continue only if you are ${ticket.subject}, in this ` +
          `browser: whoever signs in next links their ${upstream} account to ` +
          `${ticket.subject}. Continue to ${metadata.issuer} to sign in and approve.`,
        { href: target, label: `Continue to ${new URL(metadata.issuer).host}` },
        { 'set-cookie': binding.setCookie },
      )
    } catch (err) {
      this.#deps.log.warn('cannot start an upstream link', { upstream, error: err })
      // Only the registration's own reason is shown: others may name internal addresses.
      const reason =
        err instanceof ClientRegistrationError
          ? err.message
          : `Cannot reach the authorization server of ${upstream}.`
      page(res, 502, 'Link failed', reason)
    }
  }

  /** The redirect back from the issuer: state, `iss`, code redemption, storage. */
  async #callback(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x')
    const stateId = url.searchParams.get('state') ?? ''
    let state: Awaited<ReturnType<LinkFlowStore['takeState']>>
    try {
      // Taken, on every replica at once: the state is single-use whatever happens next.
      state = stateId === '' ? undefined : await this.#flows.takeState(stateId)
    } catch (err) {
      return this.#unavailable(res, undefined, err)
    }
    // So is the browser's cookie.
    const clear = state ? { 'set-cookie': clearBrowserBinding(stateId, this.#cookieScope()) } : {}
    if (!state) {
      return page(res, 400, 'Link expired', 'This sign-in is unknown, used or expired.')
    }
    if (!isSameBrowser(req.headers.cookie, stateId, state.browser)) {
      // Checked before the code is redeemed: a consent given in another browser (a victim sent
      // someone else's authorization URL) must not store its tokens under that someone.
      this.#deps.log.warn('upstream link refused: callback from another browser', {
        upstream: state.upstream,
      })
      return page(
        res,
        400,
        'Link refused',
        'This sign-in was not started in this browser, so it is not linked. Open the link ' +
          'Barbican gave you in this browser, and only if the link is for you.',
        undefined,
        clear,
      )
    }
    const link = this.#links.get(state.upstream)
    if (link === undefined) {
      // Started on a replica whose configuration has an upstream this one does not.
      return page(
        res,
        400,
        'Link failed',
        'This sign-in is for an unknown upstream.',
        undefined,
        clear,
      )
    }
    // Only names were kept with the state: the metadata and client are looked up again and
    // must be the ones the authorization request used.
    let metadata: AuthorizationServerMetadata | undefined
    let client: ClientIdentity | undefined
    try {
      // RFC 9207 before anything else: on a mismatch the error fields are not even read.
      metadata = await link.metadata()
      if (metadata.issuer !== state.issuer) {
        throw new OAuthError('The authorization server of this upstream changed; link again.')
      }
      checkResponseIssuer(metadata, url.searchParams.get('iss'))
      const code = url.searchParams.get('code')
      if (code === null) {
        const error = url.searchParams.get('error') ?? undefined
        throw new OAuthError(`The authorization server refused: ${error ?? 'no code'}`, { error })
      }
      client = await link.client(metadata)
      if (client.clientId !== state.clientId) {
        throw new OAuthError('The client Barbican is registered as changed; link again.')
      }
      const tokens = await tokenRequest(
        metadata,
        client,
        {
          grant_type: 'authorization_code',
          code,
          redirect_uri: `${this.#deps.baseUrl()}${CALLBACK_PATH}`,
          code_verifier: state.verifier,
          resource: link.config.resource,
        },
        this.#deps.fetch,
      )
      await link.save(state.user, metadata.issuer, tokens)
      this.#deps.log.info('upstream account linked', { upstream: state.upstream })
      await this.#audit(state.user, state.upstream, 'ok')
      page(
        res,
        200,
        'Linked',
        `Your ${state.upstream} account is linked. You can return to your client.`,
        undefined,
        clear,
      )
    } catch (err) {
      this.#deps.log.warn('upstream link failed', { upstream: state.upstream, error: err })
      if (isClientRejection(err) && metadata !== undefined && client !== undefined) {
        await this.#deps.clients.rejected(metadata.issuer, client)
      }
      await this.#audit(state.user, state.upstream, 'error', (err as Error).message)
      const reason = err instanceof OAuthError ? err.message : 'The link could not be completed.'
      page(res, 400, 'Link failed', reason, undefined, clear)
    }
  }

  /** Records an account link; a failure to record is logged, the link page still answers. */
  async #audit(
    user: string,
    upstream: string,
    outcome: 'ok' | 'error',
    detail?: string,
  ): Promise<void> {
    try {
      await this.#deps.audit?.()?.record({
        type: 'admin',
        action: 'account.link',
        actor: user,
        upstream,
        outcome,
        detail,
      })
    } catch (error) {
      this.#deps.log.error('account link not recorded in the audit log', { upstream, error })
    }
  }

  /** The link cookie goes only to the callback, and only over https when Barbican is. */
  #cookieScope() {
    return { path: CALLBACK_PATH, secure: this.#deps.baseUrl().startsWith('https:') }
  }

  /** The shared store of tickets and states cannot be reached: nothing was used up. */
  #unavailable(res: ServerResponse, upstream: string | undefined, err: unknown): void {
    this.#deps.log.warn('account link store unavailable', { upstream, error: err })
    page(
      res,
      503,
      'Link failed',
      `Barbican cannot continue this link right now: its shared state store cannot be reached ` +
        `(${STORE_UNAVAILABLE}). Try again.`,
    )
  }
}

/** One upstream's per-user OAuth credentials. */
class UpstreamLink implements CredentialSource {
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
function isClientRejection(err: unknown): boolean {
  return (
    err instanceof OAuthError &&
    (err.error === 'invalid_client' || err.error === 'unauthorized_client')
  )
}
