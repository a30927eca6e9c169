/**
 * Which `client_id` Barbican presents to an upstream's authorization server, so that linking needs
 * no client registered by hand:
 *
 * 1. a `clientId` in the configuration, when an operator gave one (an explicit choice wins);
 * 2. else its Client ID Metadata Document URL (client-metadata-document.ts), when the server
 *    advertises `client_id_metadata_document_supported` and Barbican's public URL is https;
 * 3. else a client registered dynamically (RFC 7591) at the server's `registration_endpoint`,
 *    once per (authorization server, redirect URI), kept sealed in the token store's backend so it
 *    survives restarts, and registered again when the server stops accepting it;
 * 4. else no way to sign in, said precisely.
 */
import type { AuthorizationServerMetadata } from '../auth/as-metadata.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { Logger } from '../telemetry/log.ts'
import { clientDocumentUrl } from './client-metadata-document.ts'
import { type OAuthClientConfig, OAuthError } from './oauth-client.ts'
import type { KeyProvider } from './secret-box.ts'
import type { SealedBackend } from './token-store.ts'

/** No client can be had at a server; its message is for the user on the link page. */
export class ClientRegistrationError extends OAuthError {
  override readonly name = 'ClientRegistrationError'
}

/** How the client id was obtained. */
export type ClientMethod = 'configured' | 'metadata-document' | 'dynamic'

export interface ClientIdentity extends OAuthClientConfig {
  readonly method: ClientMethod
}

/** What one upstream's link asks for. */
export interface ClientWish {
  readonly upstream: string
  readonly clientId?: string | undefined
  readonly clientSecret?: string | undefined
}

export interface RegistrarDeps {
  readonly fetch: GuardedFetch
  readonly keys: KeyProvider
  readonly backend: SealedBackend
  readonly baseUrl: () => string
  readonly redirectUri: () => string
  readonly log: Logger
}

/** A dynamic registration as stored. `expiresAt` is epoch ms; absent: never expires. */
interface Registration {
  readonly clientId: string
  readonly clientSecret?: string | undefined
  readonly expiresAt?: number | undefined
}

/** A client secret this close to expiry is replaced by a new registration. */
const EXPIRY_MARGIN_MS = 60_000

export class ClientRegistrar {
  readonly #deps: RegistrarDeps
  /** One registration in flight per slot, so concurrent links do not register twice. */
  readonly #pending = new Map<string, Promise<ClientIdentity>>()

  constructor(deps: RegistrarDeps) {
    this.#deps = deps
  }

  /** The client to use at `metadata`'s server for `wish.upstream`. */
  async clientFor(
    metadata: AuthorizationServerMetadata,
    wish: ClientWish,
  ): Promise<ClientIdentity> {
    if (wish.clientId !== undefined) {
      return { method: 'configured', clientId: wish.clientId, clientSecret: wish.clientSecret }
    }
    const documentUrl = clientDocumentUrl(this.#deps.baseUrl(), wish.upstream)
    if (metadata.client_id_metadata_document_supported === true && documentUrl !== undefined) {
      return { method: 'metadata-document', clientId: documentUrl }
    }
    if (typeof metadata.registration_endpoint === 'string') {
      return await this.#registered(metadata, metadata.registration_endpoint)
    }
    const cimd =
      metadata.client_id_metadata_document_supported === true
        ? ' (it supports client metadata documents, but auth.publicUrl is not https)'
        : ''
    throw new ClientRegistrationError(
      `Upstream "${wish.upstream}": ${metadata.issuer} offers no dynamic client registration` +
        `${cimd}; configure credentials.clientId registered there`,
    )
  }

  /**
   * The server rejected `client` (invalid_client): a dynamic registration is dropped, so the next
   * link registers again. Other clients are the operator's or the document's to fix.
   */
  async rejected(issuer: string, client: ClientIdentity): Promise<void> {
    if (client.method !== 'dynamic') return
    const slot = this.#slot(issuer)
    const stored = await this.#load(slot)
    if (stored?.clientId !== client.clientId) return
    await this.#deps.backend.delete(slot)
    this.#deps.log.info('dynamic client registration rejected; registering again on next link', {
      issuer,
    })
  }

  async #registered(
    metadata: AuthorizationServerMetadata,
    endpoint: string,
  ): Promise<ClientIdentity> {
    const slot = this.#slot(metadata.issuer)
    const stored = await this.#load(slot)
    if (stored && (stored.expiresAt ?? Infinity) - EXPIRY_MARGIN_MS > Date.now()) {
      return { method: 'dynamic', clientId: stored.clientId, clientSecret: stored.clientSecret }
    }
    let running = this.#pending.get(slot)
    if (!running) {
      running = this.#register(metadata.issuer, endpoint, slot).finally(() =>
        this.#pending.delete(slot),
      )
      this.#pending.set(slot, running)
    }
    return await running
  }

  async #register(issuer: string, endpoint: string, slot: string): Promise<ClientIdentity> {
    const request = {
      client_name: `Barbican at ${new URL(this.#deps.baseUrl()).host}`,
      redirect_uris: [this.#deps.redirectUri()],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      // Barbican is a server and can keep a secret: a confidential client, PKCE as well.
      token_endpoint_auth_method: 'client_secret_basic',
    }
    const res = await this.#deps.fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(request),
    })
    const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>
    if (!res.ok || typeof answer.client_id !== 'string' || answer.client_id === '') {
      const reason =
        typeof answer.error === 'string'
          ? `${answer.error}${typeof answer.error_description === 'string' ? `: ${answer.error_description}` : ''}`
          : `HTTP ${res.status}`
      throw new ClientRegistrationError(
        `Dynamic client registration at ${issuer} failed: ${reason}`,
      )
    }
    const expires = answer.client_secret_expires_at
    const registration: Registration = {
      clientId: answer.client_id,
      clientSecret: typeof answer.client_secret === 'string' ? answer.client_secret : undefined,
      // RFC 7591 §3.2.1: 0 means the secret does not expire.
      expiresAt: typeof expires === 'number' && expires > 0 ? expires * 1000 : undefined,
    }
    await this.#deps.backend.put(
      slot,
      await this.#deps.keys.seal(JSON.stringify(registration), slot),
    )
    this.#deps.log.info('registered Barbican as an OAuth client (RFC 7591)', { issuer })
    return {
      method: 'dynamic',
      clientId: registration.clientId,
      clientSecret: registration.clientSecret,
    }
  }

  async #load(slot: string): Promise<Registration | undefined> {
    const sealed = await this.#deps.backend.get(slot)
    if (sealed === undefined) return undefined
    try {
      return JSON.parse(await this.#deps.keys.open(sealed, slot)) as Registration
    } catch {
      // Sealed under another key: register again rather than fail.
      await this.#deps.backend.delete(slot)
      return undefined
    }
  }

  /** Per authorization server and redirect URI: a new public URL needs a new registration. */
  #slot(issuer: string): string {
    return `client:${JSON.stringify([issuer, this.#deps.redirectUri()])}`
  }
}
