/** The audit log in process memory: for tests and `store: { memory: {} }`. */
import type { AuditQuery, AuditStore, ChainHead, Checkpoint } from './audit-store.ts'
import { bodyAgrees } from './query.ts'
import { type AuditRecord, GENESIS_HASH } from './record.ts'

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
  return {
    async append(build) {
      // Stored as a backend would: the body is the record, nothing else.
      const added = build(head()).map(({ searchable: _s, ...r }) => r)
      records.push(...added)
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
    async addCheckpoint(checkpoint) {
      checkpoints.push(checkpoint)
      checkpoints.sort((a, b) => a.seq - b.seq || a.at.localeCompare(b.at))
    },
    async checkpoints() {
      return [...checkpoints]
    },
    async prune(checkpoint) {
      const keep = records.findIndex((r) => r.seq > checkpoint.seq)
      const removed = keep < 0 ? records.length : keep
      records.splice(0, removed)
      await this.addCheckpoint(checkpoint)
      return removed
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
