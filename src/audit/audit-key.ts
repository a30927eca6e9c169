/**
 * The gateway's audit key: an Ed25519 key pair that signs checkpoints, and the MAC key of the
 * record chain derived from it (HKDF-SHA-256, ADR 102). Kept outside the store, so that whoever
 * can only write the store cannot extend the chain or sign a checkpoint: in `BARBICAN_AUDIT_KEY`
 * (the key every replica of a fleet shares, ADR 117), or else a PKCS#8 PEM file (mode 0600)
 * beside the audit database (`.barbican/` with PostgreSQL). Whoever can read it can do both, so
 * it is as sensitive as the rest of the embedded state (docs/audit.md "Threat model").
 * node:crypto does the work: no dependency at start-up.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  hash,
  hkdfSync,
  type KeyObject,
  sign,
  verify,
} from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import type { Checkpoint } from './audit-store.ts'

export interface AuditKey {
  /** SHA-256 of the public key (SPKI DER), first 16 hex digits. */
  readonly keyId: string
  /** Absent for a key that may only verify. */
  readonly privateKey?: KeyObject | undefined
  readonly publicKey: KeyObject
  /**
   * The record chain's HMAC key (record.ts `recordMac`), derived from the private half: one
   * file holds both, and the MAC needs no key of its own to rotate or lose. Absent with the
   * private half.
   */
  readonly macKey?: Buffer | undefined
}

/** The `prev` of checkpoint number 1: no checkpoint came before it. */
export const FIRST_CHECKPOINT_PREV = '0'.repeat(64)

/** What a checkpoint's fields say, before it is signed. */
export type UnsignedCheckpoint = Omit<Checkpoint, 'keyId' | 'signature'>

/**
 * What a checkpoint signature covers. Version 2 (ADR 102) names the checkpoint's number and the
 * hash of the one before it, so checkpoints form a chain of their own; version 1 (no number) is
 * what releases before it signed, still verified as such.
 */
export function checkpointPayload(c: UnsignedCheckpoint): Buffer {
  if (c.number === undefined) {
    return Buffer.from(`barbican-audit-checkpoint v1\n${c.seq}\n${c.hash}\n${c.at}\n${c.reason}`)
  }
  return Buffer.from(
    `barbican-audit-checkpoint v2\n${c.number}\n${c.prev}\n${c.seq}\n${c.hash}\n${c.at}\n${c.reason}`,
  )
}

/** The hash that the next checkpoint names as its `prev`: SHA-256 of what was signed. */
export function checkpointHash(c: UnsignedCheckpoint): string {
  return hash('sha256', checkpointPayload(c), 'hex')
}

/**
 * Signs a checkpoint of `head` that follows `previous` (the last numbered checkpoint of the
 * store, read in the same transaction: audit-store.ts `addCheckpoint`).
 */
export function signCheckpoint(
  key: AuditKey,
  head: Pick<Checkpoint, 'seq' | 'hash' | 'at' | 'reason'>,
  previous: Checkpoint | undefined,
): Checkpoint {
  if (!key.privateKey) throw new Error('The audit key can only verify: it has no private half')
  const unsigned: UnsignedCheckpoint = {
    seq: head.seq,
    hash: head.hash,
    at: head.at,
    reason: head.reason,
    number: (previous?.number ?? 0) + 1,
    prev: previous?.number === undefined ? FIRST_CHECKPOINT_PREV : checkpointHash(previous),
  }
  const signature = sign(null, checkpointPayload(unsigned), key.privateKey).toString('base64url')
  return { ...unsigned, keyId: key.keyId, signature }
}

export function checkpointSignatureValid(key: AuditKey, c: Checkpoint): boolean {
  if (c.keyId !== key.keyId) return false
  try {
    return verify(null, checkpointPayload(c), key.publicKey, Buffer.from(c.signature, 'base64url'))
  } catch {
    return false
  }
}

export function auditKeyOf(privateKey: KeyObject): AuditKey {
  const publicKey = createPublicKey(privateKey)
  const secret = privateKey.export({ type: 'pkcs8', format: 'der' })
  const macKey = Buffer.from(hkdfSync('sha256', secret, '', 'barbican-audit record mac v2', 32))
  return { keyId: keyIdOf(publicKey), privateKey, publicKey, macKey }
}

function keyIdOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: 'spki', format: 'der' })
  return createHash('sha256').update(der).digest('hex').slice(0, 16)
}

/** A fresh key kept in memory only (tests, `store: { memory: {} }`). */
export function ephemeralAuditKey(): AuditKey {
  return auditKeyOf(generateKeyPairSync('ed25519').privateKey)
}

/**
 * The key in `path`, created when `create` and the file does not exist. Two processes starting
 * at once cannot both create it: the file is written with O_EXCL and the loser reads the
 * winner's.
 */
export function loadAuditKey(path: string, create: boolean): AuditKey {
  try {
    return auditKeyOf(createPrivateKey(readFileSync(path, 'utf8')))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || !create) throw err
  }
  mkdirSync(dirname(path), { recursive: true })
  const { privateKey } = generateKeyPairSync('ed25519')
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' })
  try {
    writeFileSync(path, pem, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return auditKeyOf(createPrivateKey(readFileSync(path, 'utf8')))
  }
  return auditKeyOf(privateKey)
}

/** The environment variable that holds the audit key (ADR 117). */
export const AUDIT_KEY_ENV = 'BARBICAN_AUDIT_KEY'

/** PKCS#8 DER of an Ed25519 private key, before its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

/**
 * The key `BARBICAN_AUDIT_KEY` gives: a PKCS#8 PEM (the content of an `audit-key.pem`, to keep
 * the key a gateway made before), or a 32-byte Ed25519 seed as 64 hex digits or base64
 * (`openssl rand -hex 32`).
 */
export function auditKeyFromText(text: string): AuditKey {
  const value = text.trim()
  try {
    if (value.startsWith('-----BEGIN')) {
      const key = createPrivateKey(value)
      if (key.asymmetricKeyType !== 'ed25519') throw new Error('not an Ed25519 key')
      return auditKeyOf(key)
    }
    const seed = /^[0-9a-fA-F]{64}$/.test(value)
      ? Buffer.from(value, 'hex')
      : Buffer.from(value, 'base64')
    if (seed.length !== 32) throw new Error(`${seed.length} bytes, not 32`)
    const der = Buffer.concat([ED25519_PKCS8_PREFIX, seed])
    return auditKeyOf(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }))
  } catch (err) {
    throw new BarbicanError(
      'ERR_CONFIG_INVALID',
      `${AUDIT_KEY_ENV} is not an audit key (${(err as Error).message}): give 64 hex digits ` +
        '(openssl rand -hex 32), 32 bytes in base64, or the PEM of an audit-key.pem',
      { cause: err },
    )
  }
}
