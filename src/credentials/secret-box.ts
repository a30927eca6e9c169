/**
 * Encryption of secrets at rest and in memory: AES-256-GCM with a 256-bit key taken from the
 * environment (`BARBICAN_SECRET_KEY`, base64 or hex). Every ciphertext is bound to the slot it
 * belongs to (additional authenticated data such as "upstream:github:header:authorization"), so a
 * value copied from one slot to another fails to decrypt. The KeyProvider interface is the seam
 * for a KMS: one that wraps data keys remotely implements the same two methods.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

/** Prefix of encrypted values, in config files and stores alike. */
export const SEALED_PREFIX = 'enc:v1:'

/** Encrypts and decrypts small secrets; a KMS-backed implementation may replace the local one. */
export interface KeyProvider {
  seal(plaintext: string, context: string): Promise<string>
  open(sealed: string, context: string): Promise<string>
}

/** Thrown when a sealed value cannot be opened (wrong key, wrong slot, tampered). */
export class SecretError extends Error {
  override readonly name = 'SecretError'
  readonly code = 'ERR_SECRET'
}

/** A KeyProvider with one local AES-256-GCM key. */
export class LocalKeyProvider implements KeyProvider {
  readonly #key: Buffer

  constructor(key: Buffer) {
    if (key.length !== 32) throw new SecretError('The secret key must be 32 bytes (256 bits)')
    this.#key = key
  }

  async seal(plaintext: string, context: string): Promise<string> {
    return sealSync(this.#key, plaintext, context)
  }

  async open(sealed: string, context: string): Promise<string> {
    return openSync(this.#key, sealed, context)
  }
}

/**
 * The key from `BARBICAN_SECRET_KEY`; without it, a random key for this process only, which
 * keeps secrets encrypted in memory but cannot open anything sealed by another process.
 */
export function keyProviderFromEnv(env: NodeJS.ProcessEnv = process.env): {
  provider: LocalKeyProvider
  ephemeral: boolean
} {
  const text = env.BARBICAN_SECRET_KEY?.trim()
  if (!text) return { provider: new LocalKeyProvider(randomBytes(32)), ephemeral: true }
  const key = /^[0-9a-fA-F]{64}$/.test(text)
    ? Buffer.from(text, 'hex')
    : Buffer.from(text, 'base64')
  return { provider: new LocalKeyProvider(key), ephemeral: false }
}

/**
 * The slot a static secret of an upstream is sealed for: header names are case-insensitive, so
 * they are bound in lower case; environment variable names are bound as written.
 */
export function secretSlot(upstream: string, kind: 'header' | 'env', name: string): string {
  return `upstream:${upstream}:${kind}:${kind === 'header' ? name.toLowerCase() : name}`
}

/** A new random key, printed as base64 for `BARBICAN_SECRET_KEY`. */
export function generateSecretKey(): string {
  return randomBytes(32).toString('base64')
}

export function sealSync(key: Buffer, plaintext: string, context: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  cipher.setAAD(Buffer.from(context, 'utf8'))
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
  return `${SEALED_PREFIX}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`
}

export function openSync(key: Buffer, sealed: string, context: string): string {
  if (!sealed.startsWith(SEALED_PREFIX)) throw new SecretError('Not a sealed value')
  const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64url')
  if (raw.length < 28) throw new SecretError('Sealed value is truncated')
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12))
    decipher.setAAD(Buffer.from(context, 'utf8'))
    decipher.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
  } catch (err) {
    throw new SecretError('Cannot open the sealed value (wrong key or slot, or tampered)', {
      cause: err,
    })
  }
}
