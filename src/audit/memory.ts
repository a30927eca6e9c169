/** The audit log in process memory: for tests and `store: { memory: {} }`. */
import type { AuditQuery, AuditStore, ChainHead, Checkpoint } from './audit-store.ts'
import { bodyAgrees } from './query.ts'
import { type AuditRecord, GENESIS_HASH, searchableOf } from './record.ts'

/** What the memory backend holds; a test may pass its own to edit it behind the store's back. */
export interface MemoryAuditState {
  readonly records: AuditRecord[]
  readonly checkpoints: Checkpoint[]
}

export function memoryAuditStore(
  state: MemoryAuditState = { records: [], checkpoints: [] },
): AuditStore {
  const { records, checkpoints } = state
  const head = (): ChainHead => {
    const last = records.at(-1)
    if (last) return { seq: last.seq, hash: last.hash }
    const pruned = checkpoints.filter((c) => c.reason === 'prune').at(-1)
    return pruned ? { seq: pruned.seq, hash: pruned.hash } : { seq: 0, hash: GENESIS_HASH }
  }
  const lastNumbered = () =>
    checkpoints.reduce<Checkpoint | undefined>(
      (a, c) => (c.number !== undefined && (a === undefined || c.number > a.number!) ? c : a),
      undefined,
    )
  const add = (c: Checkpoint) => {
    checkpoints.push(c)
    checkpoints.sort((a, b) => a.seq - b.seq || a.at.localeCompare(b.at))
    return c
  }
  return {
    async append(build) {
      const added = build(head())
      // Stored as a backend would: the chain fields, the body and its indexed columns.
      records.push(...added.map((r) => ({ ...r, searchable: r.searchable ?? searchableOf(r) })))
      return added
    },
    async head() {
      return head()
    },
    async read(query: AuditQuery = {}) {
      const matching = records.filter((r) => matches(r, query))
      if (query.newestFirst) matching.reverse()
      return query.limit === undefined ? matching : matching.slice(0, query.limit)
    },
    async addCheckpoint(build) {
      return add(build(head(), lastNumbered()))
    },
    async checkpoints() {
      return [...checkpoints]
    },
    async prune(last, build) {
      const keep = records.findIndex((r) => r.seq > last.seq)
      const removed = keep < 0 ? records.length : keep
      records.splice(0, removed)
      return { removed, checkpoint: add(build(last, lastNumbered())) }
    },
    async close() {},
  }
}

function matches(r: AuditRecord, q: AuditQuery): boolean {
  if (q.afterSeq !== undefined && r.seq <= q.afterSeq) return false
  if (q.since !== undefined && r.at < q.since) return false
  if (q.until !== undefined && r.at > q.until) return false
  if (q.bodies !== undefined && !q.bodies.includes(r.body)) return false
  return bodyAgrees(r, q)
}
