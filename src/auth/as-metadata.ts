/**
 * Authorization server metadata discovery: RFC 8414 first, then OpenID Connect Discovery, in the
 * order the MCP authorization spec fixes for issuers with and without a path. The document's
 * `issuer` must equal the issuer it was fetched for, character for character (RFC 8414 §3.3),
 * or it is not used: a mismatch is how a poisoned document would redirect token traffic.
 * `IssuerMetadataCache` keeps what was discovered for a bounded time, in memory and, in a
 * fleet, in Redis behind it (ADR 082), so that replicas after the first do not ask the issuer.
 */
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { SharedCache } from './shared-cache.ts'

/** The metadata fields Barbican uses; the rest of the document is kept as is. */
export interface AuthorizationServerMetadata {
  readonly issuer: string
  readonly authorization_endpoint?: string
  readonly token_endpoint?: string
  readonly jwks_uri?: string
  readonly introspection_endpoint?: string
  readonly code_challenge_methods_supported?: readonly string[]
  readonly authorization_response_iss_parameter_supported?: boolean
  readonly grant_types_supported?: readonly string[]
  readonly [key: string]: unknown
}

/** The well-known URLs to try for `issuer`, in the spec's order. */
export function metadataCandidates(issuer: string): string[] {
  const url = new URL(issuer)
  const path = url.pathname.replace(/\/+$/, '')
  const origin = url.origin
  if (path === '') {
    return [
      `${origin}/.well-known/oauth-authorization-server`,
      `${origin}/.well-known/openid-configuration`,
    ]
  }
  return [
    `${origin}/.well-known/oauth-authorization-server${path}`,
    `${origin}/.well-known/openid-configuration${path}`,
    `${origin}${path}/.well-known/openid-configuration`,
  ]
}

/** Fetches and validates the issuer's metadata; throws when no candidate yields a valid one. */
export async function discoverAuthorizationServer(
  issuer: string,
  fetch: GuardedFetch,
): Promise<AuthorizationServerMetadata> {
  const faults: string[] = []
  for (const candidate of metadataCandidates(issuer)) {
    let response: Response
    try {
      response = await fetch(candidate, { headers: { accept: 'application/json' } })
    } catch (err) {
      faults.push(`${candidate}: ${(err as Error).message}`)
      continue
    }
    if (!response.ok) {
      await response.body?.cancel()
      faults.push(`${candidate}: HTTP ${response.status}`)
      continue
    }
    const doc = (await response.json()) as Record<string, unknown>
    if (doc.issuer !== issuer) {
      faults.push(`${candidate}: issuer ${JSON.stringify(doc.issuer)} is not ${issuer}`)
      continue
    }
    return doc as AuthorizationServerMetadata
  }
  throw new Error(`No valid authorization server metadata for ${issuer} (${faults.join('; ')})`)
}

/** How long discovered metadata is used before the issuer is asked again (both levels). */
export const METADATA_MAX_AGE_MS = 60 * 60_000

export interface IssuerMetadataCacheOptions {
  readonly fetch: GuardedFetch
  /** The fleet's second level (Redis), read on a memory miss before the issuer is asked. */
  readonly shared?: SharedCache | undefined
  /** How long one discovery is used, from when it was fetched (default 1 h). */
  readonly maxAgeMs?: number | undefined
  /** Clock, for tests. */
  readonly now?: (() => number) | undefined
}

/** One discovery as cached: the document and when the issuer served it (epoch ms). */
interface Discovered {
  readonly doc: AuthorizationServerMetadata
  readonly at: number
}

/**
 * Issuers' metadata, memory first and Redis behind (written through), each entry used for
 * `maxAgeMs` from when the issuer served it, wherever it is read. A copy read from Redis is
 * checked as a fetched one is (its `issuer`); Redis failing, or a copy that fails the check, is a
 * miss. Failures are never cached. Concurrent misses for one issuer share one discovery.
 */
export class IssuerMetadataCache {
  readonly #options: IssuerMetadataCacheOptions
  readonly #maxAgeMs: number
  readonly #now: () => number
  readonly #memory = new Map<string, Discovered>()
  readonly #pending = new Map<string, Promise<AuthorizationServerMetadata>>()

  constructor(options: IssuerMetadataCacheOptions) {
    this.#options = options
    this.#maxAgeMs = options.maxAgeMs ?? METADATA_MAX_AGE_MS
    this.#now = options.now ?? Date.now
  }

  /** The issuer's validated metadata; throws as `discoverAuthorizationServer` does. */
  get(issuer: string): Promise<AuthorizationServerMetadata> {
    const held = this.#memory.get(issuer)
    if (held !== undefined && this.#fresh(held)) return Promise.resolve(held.doc)
    let pending = this.#pending.get(issuer)
    if (pending === undefined) {
      pending = this.#discover(issuer).finally(() => this.#pending.delete(issuer))
      this.#pending.set(issuer, pending)
    }
    return pending
  }

  #fresh(entry: Discovered): boolean {
    return this.#now() - entry.at < this.#maxAgeMs
  }

  async #discover(issuer: string): Promise<AuthorizationServerMetadata> {
    const shared = this.#options.shared
    if (shared !== undefined) {
      const copy = parseDiscovered(await shared.get('metadata', issuer), issuer)
      if (copy !== undefined && this.#fresh(copy)) {
        this.#memory.set(issuer, copy)
        return copy.doc
      }
    }
    const doc = await discoverAuthorizationServer(issuer, this.#options.fetch)
    const entry: Discovered = { doc, at: this.#now() }
    this.#memory.set(issuer, entry)
    await shared?.set('metadata', issuer, JSON.stringify(entry), this.#maxAgeMs)
    return doc
  }
}

/** A copy from Redis, if it is one and names `issuer` as a fetched document must. */
function parseDiscovered(text: string | undefined, issuer: string): Discovered | undefined {
  if (text === undefined) return undefined
  try {
    const entry = JSON.parse(text) as { doc?: { issuer?: unknown }; at?: unknown }
    return typeof entry.at === 'number' &&
      typeof entry.doc === 'object' &&
      entry.doc !== null &&
      entry.doc.issuer === issuer
      ? (entry as Discovered)
      : undefined
  } catch {
    return undefined
  }
}
