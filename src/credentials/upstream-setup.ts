/**
 * How an upstream's transport gets Barbican's credentials and the caller's context: static
 * secrets (headers or environment, sealed in memory, opened only when a connection is made), and,
 * when inbound auth is configured, the per-request stamp (auth/context.ts) that adds who the call
 * is for and any per-user upstream token.
 */

import type { AuthRuntime } from '../auth/auth-runtime.ts'
import type { CredentialSource } from '../auth/context.ts'
import { stateKeyFromEnv } from '../bridge/request-state.ts'
import { BarbicanError } from '../common/errors.ts'
import type { CredentialsConfig } from '../config/auth-schema.ts'
import type { UpstreamConfig } from '../config/config.ts'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { RedisClient } from '../store/redis.ts'
import { stampedTransport } from '../transports/stamped-transport.ts'
import type { ReceiveInfo, SendOptions, Transport } from '../transports/transport.ts'
import { requestOwner } from '../upstreams/upstream-client.ts'
import { ClientRegistrar } from './client-registration.ts'
import { linkStateKey, RedisLinkFlowStore } from './link-flow-store.ts'
import { CALLBACK_PATH, LinkRegistry } from './oauth-link.ts'
import { postgresBackend } from './postgres-backend.ts'
import { RedisRefreshLocks } from './refresh-lock.ts'
import { type KeyProvider, keyProviderFromEnv, SEALED_PREFIX, secretSlot } from './secret-box.ts'
import { sqliteBackend } from './sqlite-backend.ts'
import { clientCredentialsSource, tokenExchangeSource } from './token-sources.ts'
import { memoryBackend, type SealedBackend, TokenStore } from './token-store.ts'

type Make = (spec: UpstreamConfig) => Transport

/** The fleet's Redis connection and key prefix (gateway/backends.ts), when there is one. */
export interface FleetRedis {
  readonly client: RedisClient
  readonly prefix: string
}

let sharedKeys: KeyProvider | undefined

/** The process's key provider (BARBICAN_SECRET_KEY), created on first use. */
export function processKeys(): KeyProvider {
  sharedKeys ??= keyProviderFromEnv().provider
  return sharedKeys
}

/** A sealed copy of one upstream's static secrets, opened per connection. */
interface SealedSecrets {
  readonly headers: Readonly<Record<string, Promise<string>>>
  readonly env: Readonly<Record<string, Promise<string>>>
}

/**
 * Returns the upstream's transport factory: `make` builds the plain transport from a spec with
 * the secrets filled in; the result is wrapped so requests carry the caller's context. `redis`:
 * the fleet's, where account-link flows and refresh locks are kept (ADR 089).
 */
export function securedTransportFactory(
  u: UpstreamConfig,
  auth: AuthRuntime | undefined,
  redis: FleetRedis | undefined,
  make: Make,
): () => Transport {
  const credentials = u.credentials
  const secrets =
    credentials?.mode === 'static'
      ? sealAll(u.name, credentials.headers, credentials.env)
      : undefined
  if (auth && credentials && credentials.mode !== 'static' && credentials.mode !== 'none') {
    auth.setCredentials(u.name, credentialSource(u, credentials, auth, redis))
  }
  if (!secrets && !auth) return () => make(u)
  const stamp = auth?.stampFor(u.name, audienceOf(u))
  // Nothing to open first: the stamp wraps the plain transport, no deferred layer per message.
  if (!secrets && stamp) return () => stampedTransport(make(u), stamp, requestOwner)
  return () =>
    new DeferredTransport(async () => {
      const spec = secrets ? await withSecrets(u, secrets) : u
      const inner = make(spec)
      return stamp ? stampedTransport(inner, stamp, requestOwner) : inner
    })
}

const registries = new WeakMap<AuthRuntime, LinkRegistry>()
/** The store of users' linked upstream tokens, per runtime (read by the admin console). */
const linkStores = new WeakMap<AuthRuntime, TokenStore>()

/** Users' linked accounts of this runtime; undefined when no upstream uses `oauth`. */
export function linkedTokenStore(auth: AuthRuntime | undefined): TokenStore | undefined {
  return auth === undefined ? undefined : linkStores.get(auth)
}

/** The token-based credential source of one upstream (oauth, client credentials, exchange). */
function credentialSource(
  u: UpstreamConfig,
  credentials: Exclude<CredentialsConfig, { mode: 'none' } | { mode: 'static' }>,
  auth: AuthRuntime,
  redis: FleetRedis | undefined,
): CredentialSource {
  const resource = credentials.resource ?? ('url' in u ? u.url : undefined)
  if (resource === undefined) {
    throw new Error(`Upstream "${u.name}": credentials need a "resource" for a stdio upstream`)
  }
  switch (credentials.mode) {
    case 'client-credentials':
      return clientCredentialsSource({ ...credentials, resource }, auth.fetch)
    case 'token-exchange':
      return tokenExchangeSource({ ...credentials, resource }, auth.fetch)
    case 'oauth': {
      let registry = registries.get(auth)
      if (!registry) {
        // Linked tokens and dynamic client registrations share one sealed backend.
        const backend = tokenBackendOf(auth.config.tokens)
        // Its connections end with the runtime (a stopped server leaves no pool open).
        auth.onClose(async () => await backend.close?.())
        const store = new TokenStore(processKeys(), backend)
        linkStores.set(auth, store)
        registry = new LinkRegistry({
          fetch: auth.fetch,
          store,
          baseUrl: () => auth.baseUrl(),
          log: auth.log,
          audit: () => auth.audit,
          metadata: auth.metadata,
          // In a fleet the link page and the callback may land on any replica, and replicas
          // refresh one link one at a time (ADR 089); the verifier is sealed with a key derived
          // from the fleet's request-state key, which every replica has alike (ADR 059).
          ...(redis === undefined
            ? {}
            : {
                flows: new RedisLinkFlowStore(
                  redis.client,
                  redis.prefix,
                  linkStateKey(stateKeyFromEnv()),
                ),
                locks: new RedisRefreshLocks(redis.client, redis.prefix),
              }),
          clients: new ClientRegistrar({
            fetch: auth.fetch,
            keys: processKeys(),
            backend,
            baseUrl: () => auth.baseUrl(),
            redirectUri: () => `${auth.baseUrl()}${CALLBACK_PATH}`,
            log: auth.log,
          }),
        })
        registries.set(auth, registry)
      }
      const source = registry.add(u.name, { ...credentials, resource })
      for (const [path, handler] of registry.routes()) auth.routes.set(path, handler)
      return source
    }
  }
}

/** Where linked tokens are kept: `auth.tokens`, or memory. */
function tokenBackendOf(
  tokens: AuthRuntime['config']['tokens'],
): SealedBackend & { close?(): void | Promise<void> } {
  if (tokens === undefined) return memoryBackend()
  if ('sqlite' in tokens) return sqliteBackend(tokens.sqlite)
  // PostgreSQL is shared by every replica. A replica with a key of its own would read the
  // others' tokens as sealed by someone else and drop them: refuse to start instead.
  if (keyProviderFromEnv().ephemeral) {
    throw new BarbicanError(
      'ERR_CONFIG_INVALID',
      'auth.tokens.postgres: BARBICAN_SECRET_KEY is not set; linked tokens in PostgreSQL are shared by every replica, so each needs the same key (32 random bytes, e.g. `openssl rand -base64 32`)',
    )
  }
  return postgresBackend(tokens.postgres, { migrate: tokens.migrate })
}

/** What assertions for this upstream name as audience: its URL, or a name-based URN for local ones. */
export function audienceOf(u: UpstreamConfig): string {
  return 'url' in u ? u.url : `urn:barbican:upstream:${u.name}`
}

function sealAll(
  upstream: string,
  headers: Readonly<Record<string, string>>,
  env: Readonly<Record<string, string>>,
): SealedSecrets {
  const keys = processKeys()
  const seal = (slot: string, value: string) =>
    value.startsWith(SEALED_PREFIX) ? Promise.resolve(value) : keys.seal(value, slot)
  const sealed = (kind: 'header' | 'env', values: Readonly<Record<string, string>>) =>
    Object.fromEntries(
      Object.entries(values).map(([k, v]) => {
        const p = seal(secretSlot(upstream, kind, k), v)
        p.catch(() => {})
        return [k, p]
      }),
    )
  return { headers: sealed('header', headers), env: sealed('env', env) }
}

async function withSecrets(u: UpstreamConfig, secrets: SealedSecrets): Promise<UpstreamConfig> {
  const keys = processKeys()
  const open = async (
    kind: 'header' | 'env',
    values: Readonly<Record<string, Promise<string>>>,
  ) => {
    const out: Record<string, string> = {}
    for (const [k, sealed] of Object.entries(values)) {
      out[k] = await keys.open(await sealed, secretSlot(u.name, kind, k))
    }
    return out
  }
  if (u.transport === 'stdio')
    return { ...u, env: { ...u.env, ...(await open('env', secrets.env)) } }
  if (u.transport === 'wasm') return u
  return { ...u, headers: { ...u.headers, ...(await open('header', secrets.headers)) } }
}

type MessageHandler = (message: JsonRpcMessage, info?: ReceiveInfo) => void

/**
 * A transport built when it starts (opening secrets may be asynchronous, e.g. with a KMS), which
 * keeps the handlers set before that and hands them over.
 */
class DeferredTransport implements Transport {
  readonly #build: () => Promise<Transport>
  #inner: Transport | undefined
  #closed = false
  #onmessage: MessageHandler | undefined
  #onclose: (() => void) | undefined
  #onerror: ((error: Error) => void) | undefined

  constructor(build: () => Promise<Transport>) {
    this.#build = build
  }

  get onmessage(): MessageHandler {
    return this.#onmessage as MessageHandler
  }
  set onmessage(handler: MessageHandler) {
    this.#onmessage = handler
    if (this.#inner) this.#inner.onmessage = handler
  }
  get onclose(): () => void {
    return this.#onclose as () => void
  }
  set onclose(handler: () => void) {
    this.#onclose = handler
    if (this.#inner) this.#inner.onclose = handler
  }
  get onerror(): (error: Error) => void {
    return this.#onerror as (error: Error) => void
  }
  set onerror(handler: (error: Error) => void) {
    this.#onerror = handler
    if (this.#inner) this.#inner.onerror = handler
  }
  get sessionId(): string | undefined {
    return this.#inner?.sessionId
  }

  async start(): Promise<void> {
    if (this.#closed) throw new Error('The transport is closed')
    const inner = await this.#build()
    this.#inner = inner
    if (this.#onmessage) inner.onmessage = this.#onmessage
    if (this.#onclose) inner.onclose = this.#onclose
    if (this.#onerror) inner.onerror = this.#onerror
    await inner.start()
  }

  async send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    if (!this.#inner) throw new Error('The transport is not started')
    await this.#inner.send(message, options)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    if (this.#inner) await this.#inner.close()
    else this.#onclose?.()
  }
}
