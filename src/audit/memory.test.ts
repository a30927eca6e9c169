import { auditContract } from '../../test/contracts/audit.ts'
import { type MemoryAuditState, memoryAuditStore } from './memory.ts'

auditContract('memory', async () => {
  const state: MemoryAuditState = { records: [], checkpoints: [] }
  const at = (seq: number) => state.records.findIndex((r) => r.seq === seq)
  return {
    store: memoryAuditStore(state),
    tamper: {
      async editBody(seq, body) {
        const i = at(seq)
        state.records[i] = { ...state.records[i]!, body }
      },
      async deleteRecord(seq) {
        state.records.splice(at(seq), 1)
      },
      async swap(a, b) {
        const [i, j] = [at(a), at(b)]
        const [ra, rb] = [state.records[i]!, state.records[j]!]
        state.records[i] = { ...rb, seq: ra.seq }
        state.records[j] = { ...ra, seq: rb.seq }
      },
      async truncateAfter(seq) {
        state.records.splice(state.records.findIndex((r) => r.seq > seq))
      },
      async setSubject(seq, subject) {
        const i = state.records.findIndex((r) => r.seq === seq)
        const r = state.records[i]!
        state.records[i] = { ...r, searchable: { ...r.searchable!, subject } }
      },
      async deleteCheckpoint(number) {
        state.checkpoints.splice(
          state.checkpoints.findIndex((c) => c.number === number),
          1,
        )
      },
    },
  }
})
