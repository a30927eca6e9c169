/**
 * The gateway's audit key: an Ed25519 key pair that signs checkpoints. Kept as a PKCS#8 PEM file
 * (mode 0600) beside the audit database, created on first use; whoever can read it can sign,
 * so it is as sensitive as the rest of the embedded state (docs/audit.md says how to hold a
 * copy of the public half elsewhere). node:crypto does the work: no dependency at start-up.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Checkpoint } from './audit-store.ts'

export interface AuditKey {
  /** SHA-256 of the public key (SPKI DER), first 16 hex digits. */
  readonly keyId: string
  /** Absent for a key that may only verify. */
  readonly privateKey?: KeyObject | undefined
  readonly publicKey: KeyObject
}

/** What a checkpoint signature covers. */
export function checkpointPayload(c: Omit<Checkpoint, 'keyId' | 'signature'>): Buffer {
  return Buffer.from(`barbican-audit-checkpoint v1\n${c.seq}\n${c.hash}\n${c.at}\n${c.reason}`)
}

export function signCheckpoint(
  key: AuditKey,
  unsigned: Omit<Checkpoint, 'keyId' | 'signature'>,
): Checkpoint {
  if (!key.privateKey) throw new Error('The audit key can only verify: it has no private half')
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
  return { keyId: keyIdOf(publicKey), privateKey, publicKey }
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
