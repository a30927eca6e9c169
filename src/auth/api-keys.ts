/**
 * API keys: a simpler alternative to OAuth for scripts and services. Barbican stores only the
 * SHA-256 of each key (keys are 256-bit random strings, so a fast hash is enough; a slow password
 * hash would add latency to every request for no gain) and compares in constant time. Keys are
 * checked on every request, never cached per session, so a revocation (removal from the store or
 * from the keys file) ends the holder's access on their next request.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
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

export function hashApiKey(key: string): string {
  return `sha256:${createHash('sha256').update(key, 'utf8').digest('hex')}`
}

/** The keys in force: configured entries plus, optionally, a JSON file re-read when it changes. */
export class ApiKeyStore {
  readonly #configured: ApiKeyEntry[]
  readonly #file: string | undefined
  #fileEntries: ApiKeyEntry[] = []
  #fileStamp = ''
  readonly #revoked = new Set<string>()

  constructor(entries: readonly ApiKeyEntry[], options: { file?: string | undefined } = {}) {
    this.#configured = [...entries]
    this.#file = options.file
  }

  /** The identity a presented key stands for, or undefined when no live key matches. */
  verify(key: string): Identity | undefined {
    const presented = Buffer.from(hashApiKey(key), 'utf8')
    let found: ApiKeyEntry | undefined
    // Every entry is compared so the time taken does not depend on where the match is.
    for (const entry of this.entries()) {
      const stored = Buffer.from(entry.hash.toLowerCase(), 'utf8')
      if (stored.length === presented.length && timingSafeEqual(stored, presented)) found = entry
    }
    if (!found || this.#revoked.has(found.id)) return undefined
    return {
      subject: found.subject,
      tenant: found.tenant,
      client: `api-key:${found.id}`,
      scopes: [...(found.scopes ?? [])],
      method: 'api-key',
    }
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
  }

  /** The entries in force now, re-reading the keys file if it changed since last time. */
  entries(): ApiKeyEntry[] {
    if (this.#file !== undefined) this.#reload(this.#file)
    return [...this.#configured, ...this.#fileEntries]
  }

  #reload(file: string): void {
    let stamp: string
    try {
      const stat = statSync(file)
      stamp = `${stat.mtimeMs}:${stat.size}:${stat.ino}`
    } catch {
      // A missing file means no file keys: deleting the file revokes them all.
      this.#fileEntries = []
      this.#fileStamp = ''
      return
    }
    if (stamp === this.#fileStamp) return
    this.#fileStamp = stamp
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
