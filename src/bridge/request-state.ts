/**
 * The `requestState` Barbican hands to 2026-07-28 clients with an `input_required` result. The
 * client echoes it on its retry, so it is attacker-controlled: it is sealed with AES-256-GCM
 * (confidential and tamper-evident), bound to the caller's identity and to a digest of the
 * original request, and it expires. It never carries a live object, only ids: the continuation
 * of a held legacy upstream call, or a modern upstream's own state with the upstream's name.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'

/** What a sealed state says. Short keys keep the token small; it travels on every retry. */
export interface StatePayload {
  /** Who may present it: identity subject, with tenant when there is one. */
  readonly sub: string
  /** Digest of the original method and params (without MRTR fields and `_meta`). */
  readonly dig: string
  /** Expiry, epoch milliseconds. */
  readonly exp: number
  /** Continuation id of a held legacy upstream call. */
  readonly c?: string
  /** Replica holding the call `c`, in a fleet: where a retry landing elsewhere is relayed. */
  readonly o?: string
  /** Upstream whose own `requestState` is wrapped in `s` (modern upstreams). */
  readonly u?: string
  readonly s?: string
  /** Re-issue the call upstream on retry (its input was gathered out of band: URL elicitation). */
  readonly r?: 1
}

const VERSION = 'b1'

/** Shortest passphrase accepted as BARBICAN_STATE_KEY when it is not a 32-byte key itself. */
const MIN_SECRET_CHARS = 32

/**
 * The key comes from `BARBICAN_STATE_KEY` so several replicas can open each other's states
 * (docs/decisions/059): 32 bytes as 64 hex digits or base64 are used as they are; any other
 * secret of at least 32 characters (a passphrase from a secret manager) is stretched to a key
 * with HKDF-SHA-256. Without it a random key is made at start, which is enough for one process
 * (states then die with the process, as the held calls they name do anyway); a fleet without it
 * shares one key held in Redis (src/app/fleet.ts).
 */
export function stateKeyFromEnv(env: NodeJS.ProcessEnv = process.env): Buffer {
  const raw = env.BARBICAN_STATE_KEY
  if (raw === undefined || raw === '') return randomBytes(32)
  if (/^[0-9a-f]{64}$/i.test(raw)) return Buffer.from(raw, 'hex')
  if (/^[A-Za-z0-9+/]{43}=$/.test(raw)) return Buffer.from(raw, 'base64')
  if (raw.length >= MIN_SECRET_CHARS) {
    return Buffer.from(hkdfSync('sha256', raw, 'barbican', 'barbican request-state v1', 32))
  }
  throw new BarbicanError(
    'ERR_CONFIG_INVALID',
    `BARBICAN_STATE_KEY must be 32 bytes (64 hex digits or base64) or a secret of at least ${MIN_SECRET_CHARS} characters`,
  )
}

/** Seals and opens request states with one AES-256-GCM key. */
export class RequestStateSealer {
  readonly #key: Buffer

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('The request-state key must be 32 bytes')
    this.#key = key
  }

  seal(payload: StatePayload): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv)
    cipher.setAAD(Buffer.from(VERSION))
    const body = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final()])
    const tag = cipher.getAuthTag()
    return `${VERSION}.${Buffer.concat([iv, tag, body]).toString('base64url')}`
  }

  /**
   * Opens a state and checks it belongs to this caller and this request and has not expired.
   * Every failure is the same invalid-params error: the client learns nothing about why.
   */
  open(token: unknown, identity: Identity, digest: string, now = Date.now()): StatePayload {
    const payload = this.#decrypt(token)
    if (!payload || payload.sub !== subjectOf(identity) || payload.dig !== digest) throw invalid()
    if (payload.exp <= now) {
      throw new BarbicanError('ERR_INVALID_PARAMS', 'The requestState has expired; call again')
    }
    return payload
  }

  /**
   * The replica holding the call a state names, read before the state is bound to a caller:
   * enough to route the retry (the seal proves Barbican wrote it), never to act on it, since
   * the owner opens it again with every check. Undefined for a state naming no held call, one
   * sealed by a single process (no replica), or a forged one.
   */
  heldBy(token: unknown): string | undefined {
    const payload = this.#decrypt(token)
    return payload?.c !== undefined && typeof payload.o === 'string' ? payload.o : undefined
  }

  #decrypt(token: unknown): StatePayload | undefined {
    if (typeof token !== 'string' || !token.startsWith(`${VERSION}.`)) return undefined
    const raw = Buffer.from(token.slice(VERSION.length + 1), 'base64url')
    if (raw.length < 29) return undefined
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12))
      decipher.setAAD(Buffer.from(VERSION))
      decipher.setAuthTag(raw.subarray(12, 28))
      const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()])
      const parsed: unknown = JSON.parse(text.toString('utf8'))
      return isPlainObject(parsed) &&
        typeof parsed.sub === 'string' &&
        typeof parsed.dig === 'string' &&
        typeof parsed.exp === 'number'
        ? (parsed as unknown as StatePayload)
        : undefined
    } catch {
      return undefined
    }
  }
}

function invalid(): BarbicanError {
  return new BarbicanError(
    'ERR_INVALID_PARAMS',
    'The requestState is invalid: it failed its integrity check or belongs to another request',
  )
}

/** The identity a state is bound to. */
export function subjectOf(identity: Identity): string {
  return identity.tenant === undefined ? identity.subject : `${identity.tenant}/${identity.subject}`
}

/**
 * Digest of a request for binding: method plus params without `inputResponses`, `requestState`
 * and `_meta` (which legitimately change between rounds), serialized with sorted keys.
 */
export function requestDigest(method: string, params: JsonObject | undefined): string {
  const base: JsonObject = {}
  for (const key of Object.keys(params ?? {}).sort()) {
    if (key === 'inputResponses' || key === 'requestState' || key === '_meta') continue
    base[key] = params?.[key]
  }
  return createHash('sha256')
    .update(method)
    .update('\n')
    .update(stableJson(base))
    .digest('base64url')
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`
  if (isPlainObject(value)) {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}
