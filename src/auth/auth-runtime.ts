/**
 * Everything identity-related a running gateway holds, built once from the configuration: the
 * inbound authenticator and its metadata documents, the assertion signer, the API key store, the
 * guarded fetch client, and the per-upstream stamps that carry the tool-call context upstream.
 * `barbican serve` installs it on the HTTP listener; `barbican stdio` only needs the stamps.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AuditSink } from '../audit/audit-log.ts'
import type { AuthConfig } from '../config/auth-schema.ts'
import { createGuardedFetch, type GuardedFetch } from '../net/guarded-fetch.ts'
import type { Logger } from '../telemetry/log.ts'
import { ApiKeyStore } from './api-keys.ts'
import { IssuerMetadataCache } from './as-metadata.ts'
import { AssertionSigner } from './assertion.ts'
import { InboundAuthenticator } from './authenticator.ts'
import { createJwtVerifier } from './bearer.ts'
import { hasInboundAuth } from './bind-policy.ts'
import { type CredentialSource, createStamp, type Stamp } from './context.ts'
import type { Identity } from './identity.ts'
import { createIntrospector } from './introspection.ts'
import { identityKey, requestIdentity } from './request-identity.ts'
import { PRM_PREFIX, serverPath } from './resource-metadata.ts'
import type { SharedCache } from './shared-cache.ts'

/** Where Barbican publishes the public key of its assertions. */
export const JWKS_PATH = '/.well-known/jwks.json'

/** The part of the HTTP listener the runtime needs (routes and the auth hook). */
export interface AuthHost {
  readonly routes: Map<string, (req: IncomingMessage, res: ServerResponse) => void | Promise<void>>
  authenticator: InboundAuthenticator | undefined
  readonly url: string
}

export class AuthRuntime {
  readonly config: AuthConfig
  readonly signer: AssertionSigner
  readonly apiKeys: ApiKeyStore | undefined
  readonly fetch: GuardedFetch
  readonly authenticator: InboundAuthenticator
  /** Issuers' metadata: memory, then the fleet's Redis, then the issuer (ADR 082). */
  readonly metadata: IssuerMetadataCache
  readonly log: Logger
  /** Where account links are recorded (set by the command that opened the audit log). */
  audit: AuditSink | undefined
  readonly #credentials = new Map<string, CredentialSource>()
  readonly #closers: (() => Promise<void>)[] = []
  #baseUrl: string | undefined
  #servers: readonly string[] = ['default']

  /** `shared`: the fleet's Redis level of the metadata, JWKS, introspection and assertion caches. */
  constructor(config: AuthConfig, log: Logger, shared?: SharedCache) {
    this.config = config
    this.log = log
    this.fetch = createGuardedFetch({ allow: config.network.allow })
    this.signer = new AssertionSigner({
      issuer: () => this.baseUrl(),
      ttlSeconds: config.assertion.ttlSeconds,
      privateKeyPem: config.assertion.privateKeyPem,
      shared,
    })
    this.apiKeys = config.apiKeys
      ? new ApiKeyStore(config.apiKeys.keys, { file: config.apiKeys.file })
      : undefined
    // Issuers' metadata (where the key set is, and the account links' issuers), discovered once
    // per fleet (ADR 082, 089).
    const metadata = new IssuerMetadataCache({ fetch: this.fetch, shared })
    this.metadata = metadata
    const jwt = config.jwt
      ? createJwtVerifier({ ...config.jwt, fetch: this.fetch, shared, metadata })
      : undefined
    const introspection = config.introspection
      ? createIntrospector({ ...config.introspection, fetch: this.fetch, shared })
      : undefined
    const issuers = [config.jwt?.issuer, config.introspection?.issuer].filter(
      (i): i is string => i !== undefined,
    )
    this.authenticator = new InboundAuthenticator({
      baseUrl: () => this.baseUrl(),
      servers: () => this.#servers,
      jwt,
      introspection,
      apiKeys: this.apiKeys,
      requiredScopes: config.scopes,
      serverScopes: config.serverScopes,
      authorizationServers: config.authorizationServers ?? issuers,
      jwksUri: () => `${this.baseUrl()}${JWKS_PATH}`,
    })
  }

  /** Barbican's public base URL: configured, or the listener's own address once bound. */
  baseUrl(): string {
    return (this.config.publicUrl ?? this.#baseUrl ?? 'http://127.0.0.1').replace(/\/+$/, '')
  }

  /**
   * Extra public endpoints (account linking pages, OAuth callback), installed on the listener
   * with the metadata documents; src/credentials/ adds them while the plan is built.
   */
  readonly routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => Promise<void>>()

  /** Registers an upstream's outbound credentials (src/credentials/), used by its stamp. */
  setCredentials(upstream: string, source: CredentialSource): void {
    this.#credentials.set(upstream, source)
  }

  /** The stamp of one upstream: context, assertion and credentials on every request. */
  stampFor(upstream: string, audience: string): Stamp {
    // Built once, and again only if the upstream's credential source is replaced.
    let source: CredentialSource | undefined
    let stamp: Stamp | undefined
    return (method, params, owner) => {
      const credentials = this.#credentials.get(upstream)
      if (stamp === undefined || credentials !== source) {
        source = credentials
        stamp = createStamp({ signer: this.signer, audience, credentials })
      }
      return stamp(method, params, owner)
    }
  }

  /** The key the HTTP listener binds legacy sessions to: the verified caller. */
  identityOf = (req: Parameters<typeof requestIdentity>[0]): string => {
    const identity = requestIdentity(req)
    return identity ? identityKey(identity) : 'anonymous'
  }

  /** The identity of `barbican stdio`, from `auth.stdio`. */
  stdioIdentity(): Identity | undefined {
    const s = this.config.stdio
    if (!s) return undefined
    return { subject: s.subject, tenant: s.tenant, scopes: [...s.scopes], method: 'config' }
  }

  /** Hooks authentication into the listener and publishes the metadata and JWKS documents. */
  install(http: AuthHost, servers: readonly string[]): void {
    this.#servers = [...servers]
    this.#baseUrl = http.url
    if (!this.config.publicUrl && /\/\/(0\.0\.0\.0|\[::\])[:/]/.test(http.url)) {
      this.log.warn(
        'auth.publicUrl is not set and Barbican listens on a wildcard address: resource URIs ' +
          'and link URLs will name it; set auth.publicUrl to the URL clients use',
        { url: http.url },
      )
    }
    const inbound = hasInboundAuth(this.config)
    // `auth:` with only outbound settings (stdio identity, assertion, links) keeps callers anonymous.
    if (inbound) http.authenticator = this.authenticator
    for (const [path, handler] of this.routes) http.routes.set(path, handler as never)
    const json = (res: ServerResponse, body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' })
      res.end(JSON.stringify(body))
    }
    // Metadata documents only where tokens are checked: RFC 9728 needs an authorization server.
    if (inbound && this.authenticator.publishesMetadata) {
      for (const server of servers) {
        http.routes.set(`${PRM_PREFIX}${serverPath(server)}`, (_req, res) =>
          json(res, this.authenticator.metadata(server)),
        )
      }
      if (servers.includes('default')) {
        http.routes.set(PRM_PREFIX, (_req, res) =>
          json(res, this.authenticator.metadata('default')),
        )
      }
    }
    http.routes.set(JWKS_PATH, async (_req, res) => json(res, await this.signer.jwks()))
    this.log.info('inbound authentication enabled', {
      jwt: this.config.jwt?.issuer,
      introspection: this.config.introspection?.endpoint,
      apiKeys: this.apiKeys !== undefined,
      baseUrl: this.baseUrl(),
    })
  }

  /** Runs `close` when the runtime closes (e.g. the linked tokens' PostgreSQL pool). */
  onClose(close: () => Promise<void>): void {
    this.#closers.push(close)
  }

  async close(): Promise<void> {
    await Promise.all(this.#closers.splice(0).map((close) => close().catch(() => {})))
    await this.fetch.close()
  }
}
