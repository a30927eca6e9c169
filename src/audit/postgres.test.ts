import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { openPostgresPool } from '../store/postgres.ts'
import { ephemeralAuditKey } from './audit-key.ts'
import { AuditLog } from './audit-log.ts'
import { auditContract, call } from './contract.ts'
import { postgresAuditStore } from './postgres.ts'

after(dropPostgresSchemas)

auditContract('postgres', async () => {
  const pool = await openPostgresPool(await freshPostgresUrl())
  // Straight SQL, as someone with database access would tamper.
  const raw = async (sql: string, ...values: number[]) => {
    await pool.query(sql, values)
  }
  const store = postgresAuditStore(pool, true)
  return {
    store,
    tamper: {
      async editBody(seq, body) {
        await pool.query('UPDATE barbican_audit_records SET body = $1 WHERE seq = $2', [body, seq])
      },
      async deleteRecord(seq) {
        await raw('DELETE FROM barbican_audit_records WHERE seq = $1', seq)
      },
      async swap(a, b) {
        await raw('UPDATE barbican_audit_records SET seq = -1 WHERE seq = $1', a)
        await raw('UPDATE barbican_audit_records SET seq = $1 WHERE seq = $2', a, b)
        await raw('UPDATE barbican_audit_records SET seq = $1 WHERE seq = -1', b)
      },
      async truncateAfter(seq) {
        await raw('DELETE FROM barbican_audit_records WHERE seq > $1', seq)
      },
    },
  }
})

test('postgres: three replicas appending at once keep one unforked chain', async () => {
  const url = await freshPostgresUrl()
  const key = ephemeralAuditKey()
  const logs = await Promise.all(
    [1, 2, 3].map(
      async () =>
        new AuditLog({ store: postgresAuditStore(await openPostgresPool(url), true), key }),
    ),
  )
  try {
    await Promise.all(
      logs.flatMap((log, replica) =>
        Array.from({ length: 20 }, (_, i) => log.record(call(`r${replica}`, `t${i}`))),
      ),
    )
    const records = await logs[0]!.store.read()
    assert.equal(records.length, 60)
    records.forEach((r, i) => {
      assert.equal(r.seq, i + 1)
      if (i > 0) assert.equal(r.prevHash, records[i - 1]!.hash, `record ${r.seq} follows ${i}`)
    })
  } finally {
    await Promise.all(logs.map((log) => log.close()))
  }
})
