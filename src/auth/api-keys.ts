/**
 * API keys: a simpler alternative to OAuth for scripts and services. Barbican stores only the
 * SHA-256 of each key (keys are 256-bit random strings, so a fast hash is enough; a slow password
 * hash would add latency to every request for no gain). A presented key is hashed and looked up
 * by its digest: the lookup's timing can only depend on the SHA-256 of what the caller sent,
 * which tells them nothing about any stored key they could use to forge one (the standard way
 * to look up hashed tokens). Keys are checked on every request, never cached per session, so a
 * revocation (removal from the store or from the keys file) ends the holder's access on their
 * next request; the digest index is rebuilt whenever the keys in force change.
 */
import { createHash, hash as oneShotHash, randomBytes } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import type { Identity } from './identity.ts'

/** Every Barbican API key starts with this, which tells it apart from a JWT or opaque token. */
export const API_KEY_PREFIX = 'bk_'

export interface ApiKeyEntry {
  /** Stable name of the key (shown in logs and audit; used to revoke). */
  readonly id: string
  /** `sha256:<64 hex digits>` of the whole key. */
  readonly hash: string
  /** The user or workload the key acts as. */
  readonly subject: string
  readonly tenant?: string | undefined
  readonly scopes?: readonly string[] | undefined
}

/** A fresh key and the hash to store for it (`barbican` never needs to see the key again). */
export function generateApiKey(): { key: string; hash: string } {
  const key = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`
  return { key, hash: hashApiKey(key) }
}

/**
 * A fresh key and the entry that stores it, stamped with when it was made: what `barbican keys
 * create` and the admin console write, to a keys file or to PostgreSQL alike.
 */
export function issueApiKey(fields: {
  readonly id: string
  readonly subject: string
  readonly tenant?: string | undefined
  readonly scopes?: readonly string[] | undefined
}): {
  key: string
  entry: ApiKeyEntry & { readonly scopes: string[]; readonly createdAt: string }
} {
  const { key, hash } = generateApiKey()
  const entry = {
    id: fields.id,
    hash,
    subject: fields.subject,
    ...(fields.tenant === undefined ? {} : { tenant: fields.tenant }),
    scopes: [...(fields.scopes ?? [])],
    createdAt: new Date().toISOString(),
  }
  return { key, entry }
}

export function hashApiKey(key: string): string {
  return `sha256:${createHash('sha256').update(key, 'utf8').digest('hex')}`
}

/** The keys in force: configured entries plus, optionally, a JSON file re-read when it changes. */
export class ApiKeyStore {
  readonly #configured: ApiKeyEntry[]
  readonly #file: string | undefined
  #fileEntries: ApiKeyEntry[] = []
  #fileStamp = ''
  /** Keys held in a shared store (PostgreSQL), as last read by its follower. */
  #sharedEntries: ApiKeyEntry[] = []
  readonly #revoked = new Set<string>()
  /** The keys in force by lower-case hex digest, with the identity each stands for. */
  #index: Map<string, { readonly id: string; readonly identity: Identity }> | undefined

  constructor(entries: readonly ApiKeyEntry[], options: { file?: string | undefined } = {}) {
    this.#configured = [...entries]
    this.#file = options.file
  }

  /**
   * The identity a presented key stands for, or undefined when no live key matches. The same
   * (frozen) Identity object is returned for every request with the same key while the keys in
   * force stay the same.
   */
  verify(key: string): Identity | undefined {
    if (this.#file !== undefined) this.#reload(this.#file)
    this.#index ??= this.#buildIndex()
    const index = this.#index
    const found = index.get(oneShotHash('sha256', key, 'hex'))
    if (found === undefined || this.#revoked.has(found.id)) return undefined
    return found.identity
  }

  #buildIndex(): Map<string, { readonly id: string; readonly identity: Identity }> {
    const index = new Map<string, { readonly id: string; readonly identity: Identity }>()
    // Later entries win over earlier ones with the same hash, as a scan would have had it.
    for (const entry of [...this.#configured, ...this.#fileEntries, ...this.#sharedEntries]) {
      const identity: Identity = Object.freeze({
        subject: entry.subject,
        tenant: entry.tenant,
        client: `api-key:${entry.id}`,
        scopes: Object.freeze([...(entry.scopes ?? [])]),
        method: 'api-key',
      })
      // A malformed hash never matched a presented key; it is left out.
      const digest = /^sha256:([0-9a-f]{64})$/i.exec(entry.hash)?.[1]
      if (digest !== undefined) index.set(digest.toLowerCase(), { id: entry.id, identity })
    }
    return index
  }

  /** Revokes a key by id at once (in this process); returns whether it existed. */
  revoke(id: string): boolean {
    const exists = this.entries().some((e) => e.id === id)
    if (exists) this.#revoked.add(id)
    return exists
  }

  /** Adds a key at run time (tests, admin tooling). */
  add(entry: ApiKeyEntry): void {
    this.#configured.push(entry)
    this.#revoked.delete(entry.id)
    this.#index = undefined
  }

  /** The entries in force now, re-reading the keys file if it changed since last time. */
  entries(): ApiKeyEntry[] {
    if (this.#file !== undefined) this.#reload(this.#file)
    return [...this.#configured, ...this.#fileEntries, ...this.#sharedEntries]
  }

  /** The keys of the shared store, as last read. */
  sharedEntries(): readonly ApiKeyEntry[] {
    return this.#sharedEntries
  }

  /**
   * The keys of the shared store now (src/gateway/shared-api-keys.ts): they replace the last
   * ones at once, so a key removed there is refused from the next request on.
   */
  replaceShared(entries: readonly ApiKeyEntry[]): void {
    this.#sharedEntries = [...entries]
    this.#index = undefined
  }

  #reload(file: string): void {
    let stamp: string
    try {
      const stat = statSync(file)
      stamp = `${stat.mtimeMs}:${stat.size}:${stat.ino}`
    } catch {
      // A missing file means no file keys: deleting the file revokes them all.
      if (this.#fileStamp !== '' || this.#fileEntries.length > 0) this.#index = undefined
      this.#fileEntries = []
      this.#fileStamp = ''
      return
    }
    if (stamp === this.#fileStamp) return
    this.#fileStamp = stamp
    this.#index = undefined
    try {
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as { keys?: unknown }
      this.#fileEntries = Array.isArray(parsed.keys) ? parsed.keys.filter(isEntry) : []
    } catch {
      // A file being rewritten or broken grants nothing (fail closed) until it parses again.
      this.#fileEntries = []
    }
  }
}

function isEntry(value: unknown): value is ApiKeyEntry {
  const v = value as Record<string, unknown>
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.id === 'string' &&
    typeof v.subject === 'string' &&
    typeof v.hash === 'string' &&
    /^sha256:[0-9a-f]{64}$/i.test(v.hash)
  )
}
