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
import type { AuditSink } from '../audit/audit-log.ts'
import type { AuthorizationServerMetadata } from '../auth/as-metadata.ts'
import type { CredentialOutcome, CredentialSource } from '../auth/context.ts'
import type { Identity } from '../auth/identity.ts'
import { identityKey } from '../auth/request-identity.ts'
import type { Logger } from '../common/log.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
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
import type { TokenKey, TokenSet, TokenStore } from './token-store.ts'

/** Where the upstream's issuer sends the browser back. */
export const CALLBACK_PATH = '/oauth/callback'
/** Prefix of the per-upstream link pages (`/link/NAME`). */
export const LINK_PATH = '/link/'

const TICKET_TTL_MS = 10 * 60_000
const STATE_TTL_MS = 10 * 60_000
/** Tokens this close to expiry are refreshed before use. */
const EXPIRY_MARGIN_MS = 30_000

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
}

interface Ticket {
  readonly user: string
  readonly subject: string
  readonly upstream: string
  readonly expires: number
}

interface PendingState {
  readonly user: string
  /** SHA-256 of the nonce in the cookie of the browser that opened the link page. */
  readonly browser: Buffer
  readonly upstream: string
  readonly verifier: string
  readonly metadata: AuthorizationServerMetadata
  /** The client the authorization request named; the code is redeemed as that client. */
  readonly client: ClientIdentity
  readonly expires: number
}

/** Every linkable upstream of a gateway, with the two HTTP endpoints they share. */
export class LinkRegistry {
  readonly #deps: LinkDeps
  readonly #links = new Map<string, UpstreamLink>()
  readonly #tickets = new Map<string, Ticket>()
  readonly #states = new Map<string, PendingState>()

  constructor(deps: LinkDeps) {
    this.#deps = deps
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

  #ticketUrl(upstream: string, identity: Identity): string {
    this.#sweep()
    const ticket = randomBytes(24).toString('base64url')
    this.#tickets.set(ticket, {
      user: identityKey(identity),
      subject: identity.subject,
      upstream,
      expires: Date.now() + TICKET_TTL_MS,
    })
    return `${this.#deps.baseUrl()}${LINK_PATH}${encodeURIComponent(upstream)}?ticket=${ticket}`
  }

  /** The link page: consumes the ticket and offers the way to the issuer's consent screen. */
  async #start(upstream: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x')
    const id = url.searchParams.get('ticket') ?? ''
    const ticket = this.#tickets.get(id)
    this.#tickets.delete(id)
    if (!ticket || ticket.upstream !== upstream || ticket.expires < Date.now()) {
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
      this.#states.set(state, {
        user: ticket.user,
        browser: binding.hash,
        upstream,
        verifier,
        metadata,
        client,
        expires: Date.now() + STATE_TTL_MS,
      })
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
    const state = this.#states.get(stateId)
    this.#states.delete(stateId)
    // The state is single-use whatever happens next; so is the browser's cookie.
    const clear = state ? { 'set-cookie': clearBrowserBinding(stateId, this.#cookieScope()) } : {}
    if (!state || state.expires < Date.now()) {
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
    const link = this.#links.get(state.upstream)!
    try {
      // RFC 9207 before anything else: on a mismatch the error fields are not even read.
      checkResponseIssuer(state.metadata, url.searchParams.get('iss'))
      const code = url.searchParams.get('code')
      if (code === null) {
        const error = url.searchParams.get('error') ?? undefined
        throw new OAuthError(`The authorization server refused: ${error ?? 'no code'}`, { error })
      }
      const tokens = await tokenRequest(
        state.metadata,
        state.client,
        {
          grant_type: 'authorization_code',
          code,
          redirect_uri: `${this.#deps.baseUrl()}${CALLBACK_PATH}`,
          code_verifier: state.verifier,
          resource: link.config.resource,
        },
        this.#deps.fetch,
      )
      await link.save(state.user, state.metadata.issuer, tokens)
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
      if (isClientRejection(err)) {
        await this.#deps.clients.rejected(state.metadata.issuer, state.client)
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

  #sweep(): void {
    const now = Date.now()
    for (const [id, t] of this.#tickets) if (t.expires < now) this.#tickets.delete(id)
    for (const [id, s] of this.#states) if (s.expires < now) this.#states.delete(id)
  }
}

/** One upstream's per-user OAuth credentials. */
class UpstreamLink implements CredentialSource {
  readonly upstream: string
  readonly config: OAuthLinkConfig
  readonly #deps: LinkDeps
  readonly #ticketUrl: (identity: Identity) => string
  #metadata: Promise<AuthorizationServerMetadata> | undefined
  readonly #refreshing = new Map<string, Promise<TokenSet>>()

  constructor(
    upstream: string,
    config: OAuthLinkConfig,
    deps: LinkDeps,
    ticketUrl: (identity: Identity) => string,
  ) {
    this.upstream = upstream
    this.config = config
    this.#deps = deps
    this.#ticketUrl = ticketUrl
  }

  /** The issuer's validated metadata, discovered once (and again after a failure). */
  metadata(): Promise<AuthorizationServerMetadata> {
    this.#metadata ??= (async () => {
      const issuer =
        this.config.issuer ?? (await discoverResourceIssuer(this.config.resource, this.#deps.fetch))
      return await authorizationServer(issuer, this.#deps.fetch)
    })()
    this.#metadata.catch(() => {
      this.#metadata = undefined
    })
    return this.#metadata
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
    let tokens = await this.#deps.store.get(key)
    if (tokens?.expiresAt !== undefined && tokens.expiresAt - EXPIRY_MARGIN_MS < Date.now()) {
      tokens = await this.#refresh(key, metadata, tokens)
    }
    if (!tokens) {
      return {
        linkRequired: {
          url: this.#ticketUrl(identity),
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

  /** One refresh per link at a time; a failed refresh forgets the link (the user links again). */
  async #refresh(
    key: TokenKey,
    metadata: AuthorizationServerMetadata,
    tokens: TokenSet,
  ): Promise<TokenSet | undefined> {
    if (!tokens.refreshToken) {
      await this.#deps.store.delete(key)
      return undefined
    }
    const id = JSON.stringify(key)
    let running = this.#refreshing.get(id)
    if (!running) {
      running = this.client(metadata)
        .then(async (client) => {
          try {
            return await refreshTokens(
              metadata,
              client,
              tokens,
              this.config.resource,
              this.#deps.fetch,
            )
          } catch (err) {
            if (isClientRejection(err)) await this.#deps.clients.rejected(metadata.issuer, client)
            throw err
          }
        })
        .then(async (next) => {
          await this.#deps.store.put(key, next)
          return next
        })
        .finally(() => this.#refreshing.delete(id))
      this.#refreshing.set(id, running)
    }
    try {
      return await running
    } catch (err) {
      this.#deps.log.info('upstream token refresh failed; the user must link again', {
        upstream: this.upstream,
        error: err,
      })
      await this.#deps.store.delete(key)
      return undefined
    }
  }
}

/** The server no longer knows or accepts the client (RFC 6749 §5.2, §4.1.2.1). */
function isClientRejection(err: unknown): boolean {
  return (
    err instanceof OAuthError &&
    (err.error === 'invalid_client' || err.error === 'unauthorized_client')
  )
}
