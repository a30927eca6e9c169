/**
 * `barbican audit verify`: walks the whole log and names the first record or checkpoint that does
 * not verify (ADR 026, ADR 102).
 *
 * - Records: each follows the one before (no gap, its `prevHash` is that record's hash), its hash
 *   is the keyed MAC of its fields (so a store writer without the key can neither edit, re-hash
 *   nor append), and its indexed columns say what its body says.
 * - Checkpoints: each is signed by this gateway's key, numbered 1, 2, 3, … with no gap, names the
 *   hash of the one before, and never covers less of the chain than an earlier one; each record
 *   a checkpoint covers has the hash it names; none covers a record the log no longer has.
 * - Published checkpoints (copies kept outside the store, publish.ts): each must be in the store,
 *   the same. Only they can show that the last records were cut together with their checkpoints.
 * Records after the last checkpoint are reported as unproven, with their count.
 */
import { type AuditKey, checkpointHash, checkpointSignatureValid } from './audit-key.ts'
import type { AuditStore, Checkpoint } from './audit-store.ts'
import {
  type AuditRecord,
  GENESIS_HASH,
  legacyRecordHash,
  recordMac,
  type Searchable,
  searchableOf,
} from './record.ts'

export interface VerifyProblem {
  /** The first record that does not verify (or is missing). */
  readonly seq: number
  /** Set when the problem is a checkpoint's: its number (or its record's sequence number). */
  readonly checkpoint?: number | undefined
  readonly reason: string
}

export interface VerifyOptions {
  /** Checkpoints published outside the store (publish.ts `readPublished`). */
  readonly published?: readonly Checkpoint[] | undefined
}

export interface VerifyReport {
  readonly ok: boolean
  readonly problem?: VerifyProblem | undefined
  readonly records: number
  readonly firstSeq: number | undefined
  readonly lastSeq: number | undefined
  readonly checkpoints: number
  readonly lastCheckpoint: Checkpoint | undefined
  /** Records after the last checkpoint: no signed checkpoint vouches for them yet (unproven). */
  readonly unsealed: number
  /** Published checkpoints checked against the store, and the newest of them. */
  readonly published: number
  readonly lastPublished: Checkpoint | undefined
}

const PAGE = 5000

export async function verifyAuditLog(
  store: AuditStore,
  key: AuditKey,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  const checkpoints = await store.checkpoints()
  const published = options.published ?? []
  let count = 0
  let firstSeq: number | undefined
  let previous: { seq: number; hash: string } | undefined
  const lastPublished = published.reduce<Checkpoint | undefined>(
    (a, c) => (a === undefined || c.number! > a.number! ? c : a),
    undefined,
  )
  const fail = (problem: VerifyProblem) => report(false, problem)

  const chainProblem = checkpointChainProblem(checkpoints, key) ?? publishedProblem()
  if (chainProblem) return fail(chainProblem)
  const bySeq = new Map<number, Checkpoint[]>()
  for (const c of checkpoints) bySeq.set(c.seq, [...(bySeq.get(c.seq) ?? []), c])
  const context: RecordContext = { key, checkpoints: bySeq, legacyCover: legacyCover(checkpoints) }
  let afterSeq = -1
  for (;;) {
    const page = await store.read({ afterSeq, limit: PAGE })
    if (page.length === 0) break
    for (const r of page) {
      const problem = check(r, previous, context)
      if (problem) return fail(problem)
      firstSeq ??= r.seq
      previous = { seq: r.seq, hash: r.hash }
      count++
    }
    afterSeq = page.at(-1)!.seq
  }
  const lastSeq = previous?.seq
  // A checkpoint beyond the last record: the records it vouches for were cut from the tail.
  const beyond = checkpoints.filter(
    (c) => c.seq > (lastSeq ?? 0) && !isPruneOfEverything(c, lastSeq),
  )
  if (beyond.length > 0) {
    const c = beyond.at(-1)!
    const from = (lastSeq ?? 0) + 1
    return fail({
      seq: from,
      reason:
        `missing: the ${c.reason} checkpoint signed at ${c.at} vouches for record ${c.seq}, ` +
        `but the log ends at ${lastSeq ?? 'nothing'} (records ${from}–${c.seq} were deleted)`,
    })
  }
  return report(true, undefined)

  /** Each published checkpoint is signed by this key and in the store, the same. */
  function publishedProblem(): VerifyProblem | undefined {
    const stored = new Map<number, Checkpoint>()
    for (const c of checkpoints) if (c.number !== undefined) stored.set(c.number, c)
    for (const p of published) {
      const where = { seq: p.seq, checkpoint: p.number }
      if (!checkpointSignatureValid(key, p)) {
        return { ...where, reason: `the published copy: ${badCheckpoint(p, key)}` }
      }
      const s = stored.get(p.number!)
      const what = `published ${p.reason} checkpoint signed at ${p.at}, covering record ${p.seq}`
      if (!s) {
        const last = [...stored.keys()].reduce((a, b) => Math.max(a, b), 0)
        return {
          ...where,
          reason:
            `missing from the store: the ${what}, is not there (the store's checkpoints end at ` +
            `${last === 0 ? 'none' : `number ${last}`}): checkpoints were deleted, and with ` +
            'them the records they vouched for, or the store was replaced',
        }
      }
      if (checkpointHash(s) !== checkpointHash(p)) {
        return {
          ...where,
          reason: `the store's checkpoint differs from the ${what} (the checkpoints were replaced)`,
        }
      }
    }
    return undefined
  }

  function report(ok: boolean, problem: VerifyProblem | undefined): VerifyReport {
    const last = checkpoints.reduce<Checkpoint | undefined>(
      (a, c) => (a === undefined || c.seq > a.seq || (c.seq === a.seq && c.at >= a.at) ? c : a),
      undefined,
    )
    return {
      ok,
      problem,
      records: count,
      firstSeq,
      lastSeq: previous?.seq,
      checkpoints: checkpoints.length,
      lastCheckpoint: last,
      unsealed: Math.max(0, (previous?.seq ?? 0) - (last?.seq ?? 0)),
      published: published.length,
      lastPublished,
    }
  }
}

/**
 * The checkpoints' own chain (ADR 102): every signature is this key's; numbered checkpoints run
 * 1, 2, 3, … without a gap or a repeat, each names the hash of the one before, and none covers
 * less of the chain than an earlier one of its kind (prune checkpoints mark where records were
 * removed, the others the head: each kind only moves forward).
 */
function checkpointChainProblem(
  checkpoints: readonly Checkpoint[],
  key: AuditKey,
): VerifyProblem | undefined {
  for (const c of checkpoints) {
    if (!checkpointSignatureValid(key, c)) {
      return { seq: c.seq, checkpoint: c.number, reason: badCheckpoint(c, key) }
    }
  }
  const numbered = checkpoints
    .filter((c) => c.number !== undefined)
    .sort((a, b) => a.number! - b.number!)
  let before: Checkpoint | undefined
  const highest = { prune: 0, head: 0 }
  for (const c of numbered) {
    const n = c.number!
    const expected = (before?.number ?? 0) + 1
    const where = { seq: c.seq, checkpoint: n }
    if (n === before?.number) {
      return { ...where, reason: `two checkpoints are numbered ${n} (one was copied or forged)` }
    }
    if (n !== expected) {
      const gap = n - 1 === expected ? `${expected} is` : `${expected}–${n - 1} are`
      return { ...where, reason: `missing: checkpoint ${gap} not in the store (deleted)` }
    }
    if (before !== undefined && c.prev !== checkpointHash(before)) {
      return {
        ...where,
        reason: `does not follow checkpoint ${before.number} (checkpoints were reordered or replaced)`,
      }
    }
    const kind = c.reason === 'prune' ? 'prune' : 'head'
    if (c.seq < highest[kind]) {
      return {
        ...where,
        reason:
          `goes backwards: it covers record ${c.seq}, but an earlier ${kind === 'prune' ? 'prune ' : ''}` +
          `checkpoint covered record ${highest[kind]}`,
      }
    }
    highest[kind] = c.seq
    before = c
  }
  return undefined
}

/**
 * The last record a checkpoint signed before ADR 102 covers: records up to it may carry the
 * unkeyed hash of that release (a signed checkpoint vouches for them); none after it may.
 */
function legacyCover(checkpoints: readonly Checkpoint[]): number {
  let cover = 0
  for (const c of checkpoints) if (c.number === undefined) cover = Math.max(cover, c.seq)
  return cover
}

/** Pruning everything leaves no records and a prune checkpoint at the old head: that is fine. */
function isPruneOfEverything(c: Checkpoint, lastSeq: number | undefined): boolean {
  return lastSeq === undefined && c.reason === 'prune'
}

interface RecordContext {
  readonly key: AuditKey
  readonly checkpoints: ReadonlyMap<number, readonly Checkpoint[]>
  readonly legacyCover: number
}

function check(
  r: AuditRecord,
  previous: { seq: number; hash: string } | undefined,
  context: RecordContext,
): VerifyProblem | undefined {
  const link = linkProblem(r, previous, context.checkpoints)
  if (link) return link
  const hashed = hashProblem(r, context)
  if (hashed) return { seq: r.seq, reason: hashed }
  const column = columnProblem(r)
  if (column) return { seq: r.seq, reason: column }
  for (const c of context.checkpoints.get(r.seq) ?? []) {
    if (c.hash !== r.hash) {
      return {
        seq: r.seq,
        reason: `differs from the ${c.reason} checkpoint signed at ${c.at} (the chain was rewritten)`,
      }
    }
  }
  return undefined
}

/** Whether `r` follows the record before it (or starts the chain, or follows a prune). */
function linkProblem(
  r: AuditRecord,
  previous: { seq: number; hash: string } | undefined,
  checkpoints: ReadonlyMap<number, readonly Checkpoint[]>,
): VerifyProblem | undefined {
  if (previous === undefined) {
    if (r.seq !== 1) {
      // Pruned records are vouched for by a signed prune checkpoint the first record follows.
      const pruned = checkpoints.get(r.seq - 1)?.find((c) => c.reason === 'prune')
      if (!pruned) {
        return {
          seq: 1,
          reason: `missing: the log starts at record ${r.seq} and no signed prune checkpoint covers records 1–${r.seq - 1}`,
        }
      }
      if (pruned.hash !== r.prevHash) {
        return { seq: r.seq, reason: 'does not follow the signed prune checkpoint before it' }
      }
    } else if (r.prevHash !== GENESIS_HASH) {
      return { seq: r.seq, reason: 'the first record does not start the chain' }
    }
    return undefined
  }
  if (r.seq !== previous.seq + 1) {
    return { seq: previous.seq + 1, reason: `missing: record ${previous.seq + 1} was deleted` }
  }
  if (r.prevHash !== previous.hash) {
    return {
      seq: r.seq,
      reason: `does not follow record ${previous.seq} (records were reordered, replaced or deleted)`,
    }
  }
  return undefined
}

/**
 * The record's hash must be the keyed MAC of its fields. The unkeyed hash of releases before ADR
 * 102 is accepted only where a checkpoint of theirs vouches for the record; anywhere else it is
 * what someone without the key wrote.
 */
function hashProblem(r: AuditRecord, { key, legacyCover }: RecordContext): string | undefined {
  if (key.macKey && recordMac(key.macKey, r.seq, r.at, r.prevHash, r.body) === r.hash) {
    return undefined
  }
  if (legacyRecordHash(r.seq, r.at, r.prevHash, r.body) === r.hash) {
    if (r.seq <= legacyCover) return undefined
    return (
      'its hash is an unkeyed SHA-256, not the audit key’s MAC: the record was written or ' +
      're-hashed by someone without the key (forged)'
    )
  }
  return key.macKey
    ? 'its content does not match its keyed hash (edited, or written without the audit key)'
    : 'its content does not match its hash (edited)'
}

/** Every stored index column must say what the body says (the body is what is hashed). */
function columnProblem(r: AuditRecord): string | undefined {
  const stored = r.searchable
  if (stored === undefined) return undefined
  let body: Searchable
  try {
    body = searchableOf(r)
  } catch {
    return 'its body is not JSON (edited)'
  }
  for (const column of ['type', 'subject', 'target', 'outcome'] as const) {
    if (stored[column] !== body[column]) {
      return (
        `its indexed column ${column} is ${JSON.stringify(stored[column])} but its body says ` +
        `${JSON.stringify(body[column])} (the index was edited: queries by ${column} would miss ` +
        'or misattribute the record)'
      )
    }
  }
  return undefined
}

function badCheckpoint(c: Checkpoint, key: AuditKey): string {
  const which = c.number === undefined ? `the checkpoint at ${c.at}` : `checkpoint ${c.number}`
  return c.keyId !== key.keyId
    ? `${which} was signed by key ${c.keyId}, not by this gateway's key ${key.keyId}`
    : `${which} (signed at ${c.at}) has an invalid signature`
}
