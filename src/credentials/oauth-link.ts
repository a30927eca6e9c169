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
import type { AuthorizationServerMetadata } from '../auth/as-metadata.ts'
import type { CredentialSource } from '../auth/context.ts'
import type { Identity } from '../auth/identity.ts'
import { identityKey } from '../auth/request-identity.ts'
import type { ErrorCode } from '../common/errors.ts'
import {
  CLIENT_DOCUMENT_PATH,
  clientDocument,
  clientDocumentUrl,
  type RouteHandler,
  serveClientDocument,
} from './client-metadata-document.ts'
import { type ClientIdentity, ClientRegistrationError } from './client-registration.ts'
import { bindBrowser, clearBrowserBinding, isSameBrowser } from './link-browser.ts'
import { type LinkFlowStore, MemoryLinkFlowStore } from './link-flow-store.ts'
import { page } from './link-page.ts'
import {
  authorizationUrl,
  checkResponseIssuer,
  OAuthError,
  pkcePair,
  tokenRequest,
} from './oauth-client.ts'

import {
  isClientRejection,
  type LinkDeps,
  type OAuthLinkConfig,
  UpstreamLink,
} from './upstream-link.ts'

export type { LinkDeps, OAuthLinkConfig } from './upstream-link.ts'

/** Where the upstream's issuer sends the browser back. */
export const CALLBACK_PATH = '/oauth/callback'
/** Prefix of the per-upstream link pages (`/link/NAME`). */
export const LINK_PATH = '/link/'
/** The stable code a link page names when the shared store of tickets and states fails. */
const STORE_UNAVAILABLE: ErrorCode = 'ERR_STORE_UNAVAILABLE'

const TICKET_TTL_MS = 10 * 60_000
const STATE_TTL_MS = 10 * 60_000

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
