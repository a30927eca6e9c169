/**
 * Where upstream tokens obtained on a user's behalf are kept: one entry per (user, upstream,
 * issuer), so a token is only ever presented to the authorization server's resource it was
 * issued for (issuer-bound credentials), and one user's token never serves another. Entries are
 * sealed (secret-box.ts) before they reach a backend; the memory backend is the default, and a
 * persistent backend implements the same methods.
 *
 * A refresh is fenced (ADR 089): it stores its tokens only if the link still holds the entry it
 * read. Every seal draws a fresh IV, so the sealed text itself is the entry's version, and a
 * conditional write compares it: no version column, no migration.
 */
import type { KeyProvider } from './secret-box.ts'

/** The tokens of one link. `expiresAt` is epoch milliseconds. */
export interface TokenSet {
  readonly accessToken: string
  readonly refreshToken?: string | undefined
  readonly expiresAt?: number | undefined
  readonly scope?: string | undefined
}

export interface TokenKey {
  /** The Barbican identity key of the user (auth/request-identity.ts identityKey). */
  readonly user: string
  readonly upstream: string
  readonly issuer: string
}

/** Backend storage of sealed entries. */
export interface SealedBackend {
  get(key: string): Promise<string | undefined>
  put(key: string, sealed: string): Promise<void>
  /** Writes `sealed` only if the entry still holds `expected`; whether it did. */
  putIf(key: string, expected: string, sealed: string): Promise<boolean>
  delete(key: string): Promise<void>
  /** Deletes the entry only if it still holds `expected`; whether it did. */
  deleteIf(key: string, expected: string): Promise<boolean>
  /** Every slot name held (the admin console's list of links); optional for older backends. */
  list?(): Promise<string[]>
}

/** A process-local backend (tokens are lost on restart: users link again). */
export function memoryBackend(): SealedBackend {
  const entries = new Map<string, string>()
  return {
    get: async (key) => entries.get(key),
    put: async (key, sealed) => {
      entries.set(key, sealed)
    },
    putIf: async (key, expected, sealed) => {
      if (entries.get(key) !== expected) return false
      entries.set(key, sealed)
      return true
    },
    delete: async (key) => {
      entries.delete(key)
    },
    deleteIf: async (key, expected) => entries.get(key) === expected && entries.delete(key),
    list: async () => [...entries.keys()],
  }
}

/** Tokens as read, with the version a conditional write compares (the sealed entry). */
export interface StoredTokens {
  readonly tokens: TokenSet
  readonly version: string
}

/** Tokens per (user, upstream, issuer), sealed with the process key provider. */
export class TokenStore {
  readonly #keys: KeyProvider
  readonly #backend: SealedBackend

  constructor(keys: KeyProvider, backend: SealedBackend = memoryBackend()) {
    this.#keys = keys
    this.#backend = backend
  }

  async get(key: TokenKey): Promise<TokenSet | undefined> {
    return (await this.read(key))?.tokens
  }

  /** The link's tokens and their version, for a write conditional on nothing having changed. */
  async read(key: TokenKey): Promise<StoredTokens | undefined> {
    const slot = slotOf(key)
    const sealed = await this.#backend.get(slot)
    if (sealed === undefined) return undefined
    try {
      return {
        tokens: JSON.parse(await this.#keys.open(sealed, slot)) as TokenSet,
        version: sealed,
      }
    } catch {
      // Sealed under another key (BARBICAN_SECRET_KEY changed or unset): as good as unlinked.
      await this.#backend.deleteIf(slot, sealed)
      return undefined
    }
  }

  async put(key: TokenKey, tokens: TokenSet): Promise<void> {
    const slot = slotOf(key)
    await this.#backend.put(slot, await this.#keys.seal(JSON.stringify(tokens), slot))
  }

  /**
   * Stores `tokens` only if the link still holds `version` (read by `read`): false when another
   * write (a newer refresh, a new link, a deletion) came first, whose result then stands.
   */
  async replace(key: TokenKey, version: string, tokens: TokenSet): Promise<boolean> {
    const slot = slotOf(key)
    return await this.#backend.putIf(
      slot,
      version,
      await this.#keys.seal(JSON.stringify(tokens), slot),
    )
  }

  async delete(key: TokenKey): Promise<void> {
    await this.#backend.delete(slotOf(key))
  }

  /** Forgets the link only if it still holds `version`; false when it changed meanwhile. */
  async forget(key: TokenKey, version: string): Promise<boolean> {
    return await this.#backend.deleteIf(slotOf(key), version)
  }

  /**
   * Who has linked what: read from the slot names alone, nothing is unsealed. Undefined when
   * the backend cannot list.
   */
  async links(): Promise<TokenKey[] | undefined> {
    const slots = await this.#backend.list?.()
    if (slots === undefined) return undefined
    const links: TokenKey[] = []
    for (const slot of slots) {
      if (!slot.startsWith(SLOT_PREFIX)) continue
      try {
        const [user, upstream, issuer] = JSON.parse(slot.slice(SLOT_PREFIX.length)) as string[]
        if (user !== undefined && upstream !== undefined && issuer !== undefined) {
          links.push({ user, upstream, issuer })
        }
      } catch {
        // Not a slot this store wrote: not a link.
      }
    }
    return links
  }
}

const SLOT_PREFIX = 'tokens:'

/** The slot name doubles as the sealing context, binding each ciphertext to its owner. */
function slotOf(key: TokenKey): string {
  return `${SLOT_PREFIX}${JSON.stringify([key.user, key.upstream, key.issuer])}`
}
