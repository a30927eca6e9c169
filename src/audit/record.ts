/**
 * What one audit record says and how records are chained: each record's hash covers its
 * sequence number, time, the hash of the record before it and its body, so editing, removing or
 * reordering any record breaks the chain at that record. The hash is keyed (HMAC-SHA-256 with
 * the gateway's audit MAC key, ADR 102): whoever can write the store but does not hold the key
 * cannot extend or re-hash the chain. Pure: no I/O.
 */
import { createHmac, hash } from 'node:crypto'

/** The `prevHash` of record 1: nothing came before it. */
export const GENESIS_HASH = '0'.repeat(64)

/** How a call or an act ended. */
export type Outcome = 'ok' | 'error' | 'denied'

/** One client request that reached routing. */
export interface CallEvent {
  readonly type: 'call'
  /** Gateway-unique call id (session id and call number). */
  readonly callId: string
  readonly subject: string
  readonly tenant?: string | undefined
  readonly client?: string | undefined
  readonly transport: string
  readonly server: string
  readonly upstream?: string | undefined
  readonly method: string
  /** The tool or prompt name, or the resource URI, as the client sent it. */
  readonly target?: string | undefined
  /** SHA-256 (hex) of the canonical JSON of the arguments. */
  readonly argsDigest?: string | undefined
  /** Redacted arguments, only when `audit.rawArguments` is on. */
  readonly args?: unknown
  readonly outcome: Outcome
  /** Barbican's error code, or the upstream's JSON-RPC error code as a string. */
  readonly errorCode?: string | undefined
  readonly latencyMs: number
  /** What the authorize policy decided: `allow`, `deny`, or `none` (no permissions configured). */
  readonly decision: 'allow' | 'deny' | 'none'
  /** The rule that decided (`auth.permissions[2]`), when one did. */
  readonly rule?: string | undefined
  /** A human's answer when the confirm policy asked (`accept`, `decline`, `cancel`, …). */
  readonly confirmation?: string | undefined
  /** `quarantined` when trust refused the item; absent when trust did not object. */
  readonly pinState?: string | undefined
  /** W3C trace id of the request, when the client sent a traceparent. */
  readonly traceId?: string | undefined
  /** Secrets the guards policy redacted from the result, by kind (docs/policy.md). */
  readonly redactions?: Readonly<Record<string, number>> | undefined
}

/** One administrative act: a pin decision, a baseline, an account link. */
export interface AdminEvent {
  readonly type: 'admin'
  /** `pin.approve`, `pin.reject`, `config.baseline`, `account.link`, … */
  readonly action: string
  /** Who acted (operator name or the linked user's subject). */
  readonly actor: string
  readonly upstream?: string | undefined
  /** What was acted on (a pin key, a baseline hash). */
  readonly target?: string | undefined
  readonly outcome: Outcome
  readonly detail?: string | undefined
  /** The tenant whose admin acted (docs/tenants.md); absent: a gateway admin. */
  readonly tenant?: string | undefined
}

export type AuditEvent = CallEvent | AdminEvent

/** A record as stored: the chain fields and the event as the exact JSON text that was hashed. */
export interface AuditRecord {
  /** 1, 2, 3, …: no gaps. */
  readonly seq: number
  /** ISO 8601, when the record was written. */
  readonly at: string
  readonly prevHash: string
  readonly hash: string
  /** JSON of the AuditEvent. */
  readonly body: string
  /**
   * The indexed fields: when the writer still has the event (saves parsing `body` again), and
   * as stored when a backend reads a record back (verify compares them with the body).
   */
  readonly searchable?: Searchable | undefined
}

/**
 * The keyed hash of a record (ADR 102): HMAC-SHA-256, with the audit MAC key (audit-key.ts),
 * over a versioned, line-separated form of its fields. It runs once per record on the gateway's
 * thread (~1.4 µs more than a plain SHA-256 here; docs/audit.md "Performance").
 */
export function recordMac(
  mac: Buffer | RecordKey,
  seq: number,
  at: string,
  prevHash: string,
  body: string,
): string {
  const text = `barbican-audit v2\n${seq}\n${at}\n${prevHash}\n${body}`
  if (mac instanceof RecordKey) return mac.mac(text)
  return createHmac('sha256', mac).update(text).digest('hex')
}

/** SHA-256's block: HMAC's key is padded to it (RFC 2104). */
const BLOCK = 64
/** Room for a record's text beside the key block at first; it grows for a longer record. */
const FIRST_ROOM = 4096

/**
 * The audit MAC key as the writer holds it: the same HMAC-SHA-256 as `createHmac` (verify.ts
 * checks with that), computed as RFC 2104 defines it, H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ text)),
 * with the two padded key blocks made once instead of per record (`HMAC_Init_ex` redid them and
 * looked the digest up by name each time, ~8 k instructions a record) and two one-shot hashes
 * over buffers kept from record to record (no Hmac object per record). The key is copied: a
 * change to the caller's buffer does not reach it.
 */
export class RecordKey {
  /** K ⊕ ipad, then the record's text as UTF-8. */
  #inner: Buffer
  /** K ⊕ opad, then the inner hash. */
  readonly #outer = Buffer.alloc(BLOCK + 32)

  constructor(key: Buffer) {
    const k = Buffer.alloc(BLOCK)
    // A key longer than a block is hashed first (RFC 2104 section 2).
    ;(key.length > BLOCK ? hash('sha256', key, 'buffer') : key).copy(k)
    this.#inner = Buffer.alloc(BLOCK + FIRST_ROOM)
    for (let i = 0; i < BLOCK; i++) {
      this.#inner[i] = k[i]! ^ 0x36
      this.#outer[i] = k[i]! ^ 0x5c
    }
  }

  /** HMAC-SHA-256 of `text` (UTF-8), in hex: `createHmac('sha256', key).update(text)`'s. */
  mac(text: string): string {
    // At most 3 bytes of UTF-8 per UTF-16 unit: room for that needs no measuring.
    if (text.length * 3 > this.#inner.length - BLOCK) this.#makeRoom(Buffer.byteLength(text))
    const n = this.#inner.write(text, BLOCK, 'utf8')
    const inner = hash('sha256', this.#inner.subarray(0, BLOCK + n), 'base64')
    this.#outer.write(inner, BLOCK, 'base64')
    return hash('sha256', this.#outer, 'hex')
  }

  #makeRoom(bytes: number): void {
    if (bytes <= this.#inner.length - BLOCK) return
    const grown = Buffer.alloc(BLOCK + Math.max(bytes, 2 * (this.#inner.length - BLOCK)))
    this.#inner.copy(grown, 0, 0, BLOCK)
    this.#inner = grown
  }
}

/**
 * The unkeyed hash records had before ADR 102 (plain SHA-256): anyone could compute it, so
 * verify accepts it only for records a checkpoint of that release vouches for (verify.ts).
 */
export function legacyRecordHash(seq: number, at: string, prevHash: string, body: string): string {
  return hash('sha256', `barbican-audit v1\n${seq}\n${at}\n${prevHash}\n${body}`, 'hex')
}

/**
 * The record that follows `head`, with its hash. `body`, when given, must be
 * `JSON.stringify(event)` already made (the batched journal line): an event is encoded once.
 */
export function chainRecord(
  mac: Buffer | RecordKey,
  head: { readonly seq: number; readonly hash: string },
  at: string,
  event: AuditEvent,
  body: string = JSON.stringify(event),
): AuditRecord {
  return chainBody(mac, head, at, body, searchableOfEvent(event))
}

/** The record that follows `head` for an event already encoded, with its searchable fields. */
export function chainBody(
  mac: Buffer | RecordKey,
  head: { readonly seq: number; readonly hash: string },
  at: string,
  body: string,
  searchable: Searchable,
): AuditRecord {
  const seq = head.seq + 1
  const hash = recordMac(mac, seq, at, head.hash, body)
  return { seq, at, prevHash: head.hash, hash, body, searchable }
}

/** The fields records are searched by, read from the body (backends index them). */
export interface Searchable {
  readonly type: string
  /** The caller's subject, or the acting operator. */
  readonly subject: string
  /** Tool, prompt, URI or pin key. */
  readonly target: string | null
  readonly outcome: string
}

export function searchableOf(record: AuditRecord): Searchable {
  return searchableOfEvent(JSON.parse(record.body) as Record<string, unknown>)
}

/**
 * The tenant a record's call was made in, or whose admin acted; undefined for the default
 * tenant and a gateway admin's acts. The SQL stores filter on the same `tenant` field.
 */
export function tenantOf(record: AuditRecord): string | undefined {
  const event = JSON.parse(record.body) as Record<string, unknown>
  return typeof event.tenant === 'string' ? event.tenant : undefined
}

/** The searchable fields of an event (what `searchableOf` reads back from a stored body). */
export function searchableOfEvent(e: AuditEvent | Record<string, unknown>): Searchable {
  const event = e as Record<string, unknown>
  return {
    type: String(event.type),
    subject: String(event.type === 'admin' ? event.actor : event.subject),
    target: event.target === undefined ? null : String(event.target),
    outcome: String(event.outcome),
  }
}

/**
 * One JSON line for export (docs/audit.md): flat, with the record's time, sequence and hashes
 * first, so a SIEM can index it without knowing Barbican's storage.
 */
export function exportLine(record: AuditRecord): string {
  return JSON.stringify(exportFields(record))
}

/** The fields of an exported record (a JSON line, an OTel log record's attributes). */
export function exportFields(record: AuditRecord): Record<string, unknown> {
  const event = JSON.parse(record.body) as Record<string, unknown>
  return {
    timestamp: record.at,
    seq: record.seq,
    hash: record.hash,
    prevHash: record.prevHash,
    source: 'barbican',
    ...event,
  }
}
