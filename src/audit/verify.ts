/**
 * `barbican audit verify`: walks the whole log and names the first record that does not verify.
 * A record is bad when its content no longer matches its hash (edited), when it does not follow
 * the record before it (one was deleted, inserted or reordered), when a sequence number is
 * missing, when a signed checkpoint vouches for a different hash, or when a checkpoint names a
 * record the log no longer has (its tail was cut).
 */
import { type AuditKey, checkpointSignatureValid } from './audit-key.ts'
import type { AuditStore, Checkpoint } from './audit-store.ts'
import { type AuditRecord, GENESIS_HASH, recordHash } from './record.ts'

export interface VerifyProblem {
  /** The first record that does not verify (or is missing). */
  readonly seq: number
  readonly reason: string
}

export interface VerifyReport {
  readonly ok: boolean
  readonly problem?: VerifyProblem | undefined
  readonly records: number
  readonly firstSeq: number | undefined
  readonly lastSeq: number | undefined
  readonly checkpoints: number
  readonly lastCheckpoint: Checkpoint | undefined
  /** Records after the last checkpoint: written since, or the gateway stopped without one. */
  readonly unsealed: number
}

const PAGE = 5000

export async function verifyAuditLog(store: AuditStore, key: AuditKey): Promise<VerifyReport> {
  const checkpoints = await store.checkpoints()
  let count = 0
  let firstSeq: number | undefined
  let previous: { seq: number; hash: string } | undefined
  const bySeq = new Map<number, Checkpoint[]>()
  for (const c of checkpoints) {
    if (!checkpointSignatureValid(key, c)) {
      return report(false, { seq: c.seq, reason: badCheckpoint(c, key) })
    }
    bySeq.set(c.seq, [...(bySeq.get(c.seq) ?? []), c])
  }
  let afterSeq = -1
  for (;;) {
    const page = await store.read({ afterSeq, limit: PAGE })
    if (page.length === 0) break
    for (const r of page) {
      const problem = check(r, previous, bySeq)
      if (problem) return report(false, problem)
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
    return report(false, {
      seq: from,
      reason:
        `missing: the ${c.reason} checkpoint signed at ${c.at} vouches for record ${c.seq}, ` +
        `but the log ends at ${lastSeq ?? 'nothing'} (records ${from}–${c.seq} were deleted)`,
    })
  }
  return report(true, undefined)

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
    }
  }
}

/** Pruning everything leaves no records and a prune checkpoint at the old head: that is fine. */
function isPruneOfEverything(c: Checkpoint, lastSeq: number | undefined): boolean {
  return lastSeq === undefined && c.reason === 'prune'
}

function check(
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
  } else {
    if (r.seq !== previous.seq + 1) {
      return { seq: previous.seq + 1, reason: `missing: record ${previous.seq + 1} was deleted` }
    }
    if (r.prevHash !== previous.hash) {
      return {
        seq: r.seq,
        reason: `does not follow record ${previous.seq} (records were reordered, replaced or deleted)`,
      }
    }
  }
  if (recordHash(r.seq, r.at, r.prevHash, r.body) !== r.hash) {
    return { seq: r.seq, reason: 'its content does not match its hash (edited)' }
  }
  for (const c of checkpoints.get(r.seq) ?? []) {
    if (c.hash !== r.hash) {
      return {
        seq: r.seq,
        reason: `differs from the ${c.reason} checkpoint signed at ${c.at} (the chain was rewritten)`,
      }
    }
  }
  return undefined
}

function badCheckpoint(c: Checkpoint, key: AuditKey): string {
  return c.keyId !== key.keyId
    ? `the checkpoint at ${c.at} was signed by key ${c.keyId}, not by this gateway's key ${key.keyId}`
    : `the checkpoint at ${c.at} has an invalid signature`
}
