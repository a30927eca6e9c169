/**
 * Where upstream tokens obtained on a user's behalf are kept: one entry per (user, upstream,
 * issuer), so a token is only ever presented to the authorization server's resource it was
 * issued for (issuer-bound credentials), and one user's token never serves another. Entries are
 * sealed (secret-box.ts) before they reach a backend; the memory backend is the default, and a
 * persistent backend implements the same three methods.
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
  delete(key: string): Promise<void>
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
    delete: async (key) => {
      entries.delete(key)
    },
    list: async () => [...entries.keys()],
  }
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
    const slot = slotOf(key)
    const sealed = await this.#backend.get(slot)
    if (sealed === undefined) return undefined
    try {
      return JSON.parse(await this.#keys.open(sealed, slot)) as TokenSet
    } catch {
      // Sealed under another key (BARBICAN_SECRET_KEY changed or unset): as good as unlinked.
      await this.#backend.delete(slot)
      return undefined
    }
  }

  async put(key: TokenKey, tokens: TokenSet): Promise<void> {
    const slot = slotOf(key)
    await this.#backend.put(slot, await this.#keys.seal(JSON.stringify(tokens), slot))
  }

  async delete(key: TokenKey): Promise<void> {
    await this.#backend.delete(slotOf(key))
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
