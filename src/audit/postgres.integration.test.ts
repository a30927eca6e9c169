import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import type { Pool, PoolClient } from 'pg'
import { auditContract, call } from '../../test/contracts/audit.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { openPostgresPool } from '../store/postgres.ts'
import { ephemeralAuditKey, signCheckpoint } from './audit-key.ts'
import { AuditLog } from './audit-log.ts'
import { postgresAuditStore } from './postgres.ts'
import { chainRecord } from './record.ts'

/** The MAC key the records these tests build by hand are chained with. */
const MAC = ephemeralAuditKey().macKey!

after(dropPostgresSchemas)

auditContract('postgres', async () => {
  const pool = await openPostgresPool(await freshPostgresUrl())
  // Straight SQL, as someone with database access would tamper.
  const raw = async (sql: string, ...values: (number | string)[]) => {
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
      async setSubject(seq, subject) {
        await raw('UPDATE barbican_audit_records SET subject = $1 WHERE seq = $2', subject, seq)
      },
      async deleteCheckpoint(number) {
        await raw('DELETE FROM barbican_audit_checkpoints WHERE number = $1', number)
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

/**
 * Counts the round trips (queries) of the clients `pool.connect()` hands out from now on, also
 * when `pool.query` borrows one of them later: count before reading through the pool.
 */
function countRoundTrips(pool: Pool): { count: number } {
  const counter = { count: 0 }
  const counted = new WeakSet<PoolClient>()
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => Promise<PoolClient>
  // pool.query checks out with a callback: those queries are not the append's and pass as they are.
  pool.connect = (async (...args: unknown[]) => {
    if (args.length > 0) return connect(...args)
    const client = await connect()
    if (!counted.has(client)) {
      counted.add(client)
      const query = client.query.bind(client) as (...args: unknown[]) => unknown
      client.query = ((...a: unknown[]) => {
        counter.count++
        return query(...a)
      }) as typeof client.query
    }
    return client
  }) as typeof pool.connect
  return counter
}

const appendCall = (target: string) => (head: { seq: number; hash: string }) => [
  chainRecord(MAC, head, new Date().toISOString(), call('s', target)),
]

test('postgres: a lone writer appends in one round trip once it holds the head', async () => {
  const pool = await openPostgresPool(await freshPostgresUrl())
  const store = postgresAuditStore(pool, true)
  try {
    const trips = countRoundTrips(pool)
    await store.append(appendCall('t0'))
    assert.equal(trips.count, 2, 'the first append reads the head under the lock')
    for (let i = 1; i <= 5; i++) await store.append(appendCall(`t${i}`))
    assert.equal(trips.count, 2 + 5, 'each later append is one round trip')
    const records = await store.read()
    assert.deepEqual(
      records.map((r) => r.seq),
      [1, 2, 3, 4, 5, 6],
    )
  } finally {
    await store.close()
  }
})

test('postgres: an append after another writer moved the head chains onto its record', async () => {
  const url = await freshPostgresUrl()
  const [a, b] = await Promise.all([openPostgresPool(url), openPostgresPool(url)])
  const storeA = postgresAuditStore(a, true)
  const storeB = postgresAuditStore(b, true)
  try {
    // Counted from the start: A keeps the connection of its first append for the next ones.
    const trips = countRoundTrips(a)
    await storeA.append(appendCall('a1'))
    await storeB.append(appendCall('b1'))
    await storeB.append(appendCall('b2'))
    const start = trips.count
    // A still believes its record 1 is the head: that try writes nothing, the locked path does.
    const [added] = await storeA.append(appendCall('a2'))
    assert.equal(trips.count - start, 1 + 2, 'a missed try, then lock and head, then the rows')
    // Still contended: locked, and the head it reads is A's own again; then one round trip.
    await storeA.append(appendCall('a3'))
    assert.equal(trips.count - start, 3 + 2)
    await storeA.append(appendCall('a4'))
    assert.equal(trips.count - start, 5 + 1)
    const records = await storeA.read()
    assert.equal(records.length, 6)
    assert.equal(added?.seq, 4)
    assert.equal(added?.prevHash, records[2]!.hash)
    records.forEach((r, i) => {
      if (i > 0) assert.equal(r.prevHash, records[i - 1]!.hash, `record ${r.seq} follows ${i}`)
    })
    assert.equal((await storeA.head()).seq, 6)
  } finally {
    await Promise.all([storeA.close(), storeB.close()])
  }
})

test('postgres: a writer holding the head appends after a prune removed every record', async () => {
  const key = ephemeralAuditKey()
  const log = new AuditLog({
    store: postgresAuditStore(await openPostgresPool(await freshPostgresUrl()), true),
    key,
  })
  try {
    await log.record(call('s', 't1'))
    await log.record(call('s', 't2'))
    const head = await log.store.head()
    await log.store.prune(head, (pruned, last) =>
      signCheckpoint(key, { ...pruned, at: new Date().toISOString(), reason: 'prune' }, last),
    )
    await log.record(call('s', 't3'))
    const [record] = await log.store.read()
    assert.equal(record?.seq, 3)
    assert.equal(record?.prevHash, head.hash)
  } finally {
    await log.close()
  }
})

test('postgres: a one-round-trip append that waited for the lock sees what committed meanwhile', async () => {
  // The append's head check must take its snapshot after the lock is granted (ADR 086): a
  // record committed by the lock's holder while the append waited makes it miss cleanly (no
  // duplicate-key error), and the locked path then chains onto that record.
  const url = await freshPostgresUrl()
  const name = `barbican-wait-${process.pid}-${Date.now()}`
  const waiting = new URL(url)
  waiting.searchParams.set('application_name', name)
  const [a, other] = await Promise.all([
    openPostgresPool(waiting.toString()),
    openPostgresPool(url),
  ])
  const storeA = postgresAuditStore(a, true)
  const holder = await other.connect()
  try {
    const trips = countRoundTrips(a)
    await storeA.append(appendCall('a1'))
    const [mine] = await storeA.read()
    await holder.query('BEGIN')
    await holder.query('SELECT pg_advisory_xact_lock($1)', [0x61756469])
    const start = trips.count
    const appending = storeA.append(appendCall('a2'))
    // Until A's backend waits for the advisory lock inside barbican_audit_append.
    for (let waited = 0; ; waited += 20) {
      const { rows } = await other.query(
        "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
        [name],
      )
      if (rows.length > 0) break
      assert.ok(waited < 5000, 'the append waits for the lock')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    // As another replica would under the lock: the record that follows A's.
    const theirs = chainRecord(MAC, mine!, new Date().toISOString(), call('b', 'b1'))
    await holder.query(
      `INSERT INTO barbican_audit_records (seq, at, type, subject, target, outcome, prev_hash, hash, body)
       VALUES ($1, $2, 'call', 'b', 'b1', 'ok', $3, $4, $5)`,
      [theirs.seq, theirs.at, theirs.prevHash, theirs.hash, theirs.body],
    )
    await holder.query('COMMIT')
    const [added] = await appending
    assert.equal(trips.count - start, 1 + 2, 'a missed try, then the locked path')
    assert.equal(added?.seq, 3)
    assert.equal(added?.prevHash, theirs.hash)
    const records = await storeA.read()
    assert.deepEqual(
      records.map((r) => r.seq),
      [1, 2, 3],
    )
  } finally {
    holder.release()
    await other.end()
    await storeA.close()
  }
})

test('postgres: an append after the server closed the kept connection uses a new one', async () => {
  const url = new URL(await freshPostgresUrl())
  const name = `barbican-kept-${process.pid}-${Date.now()}`
  url.searchParams.set('application_name', name)
  const pool = await openPostgresPool(url.toString())
  const store = postgresAuditStore(pool, true)
  const admin = await openPostgresPool(await freshPostgresUrl())
  try {
    await store.append(appendCall('t1'))
    await store.append(appendCall('t2'))
    // The connection the store keeps between appends ends while it waits (no error escapes).
    const { rows } = await admin.query(
      'SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE application_name = $1',
      [name],
    )
    assert.ok(rows.length > 0, 'the kept connection was there to close')
    await new Promise((resolve) => setTimeout(resolve, 100))
    await store.append(appendCall('t3'))
    assert.deepEqual(
      (await store.read()).map((r) => r.seq),
      [1, 2, 3],
    )
  } finally {
    await store.close()
    await admin.end()
  }
})

test('postgres: batches store every column as given, newlines and nulls included', async () => {
  const pool = await openPostgresPool(await freshPostgresUrl())
  const store = postgresAuditStore(pool, true)
  const batchOf =
    (...subjects: string[]) =>
    (head: { seq: number; hash: string }) => {
      const at = new Date().toISOString()
      let previous = head
      return subjects.map((subject, i) => {
        const event = { ...call(subject, `t${i}`), ...(i === 1 ? { target: undefined } : {}) }
        const record = chainRecord(MAC, previous, at, event)
        previous = record
        return record
      })
    }
  try {
    await store.append(batchOf('s'))
    // One round trip each: values joined by newlines, then (a subject with one) as arrays.
    const lines = await store.append(batchOf('alice', 'bob', 'carol'))
    const arrays = await store.append(batchOf('dave', 'line\nbreak', 'erin'))
    const records = await store.read()
    assert.deepEqual(
      records.map((r) => r.seq),
      [1, 2, 3, 4, 5, 6, 7],
    )
    for (const written of [...lines, ...arrays]) {
      const stored = records[written.seq - 1]!
      assert.deepEqual(
        [stored.at, stored.prevHash, stored.hash, stored.body],
        [written.at, written.prevHash, written.hash, written.body],
      )
    }
    const { rows } = await pool.query(
      'SELECT subject, target FROM barbican_audit_records WHERE seq > 1 ORDER BY seq',
    )
    assert.deepEqual(rows, [
      { subject: 'alice', target: 't0' },
      { subject: 'bob', target: null },
      { subject: 'carol', target: 't2' },
      { subject: 'dave', target: 't0' },
      { subject: 'line\nbreak', target: null },
      { subject: 'erin', target: 't2' },
    ])
  } finally {
    await store.close()
  }
})

test('postgres: a batch keeps null, empty and multi-line targets apart', async () => {
  const pool = await openPostgresPool(await freshPostgresUrl())
  const store = postgresAuditStore(pool, true)
  const batchOf =
    (...targets: (string | undefined)[]) =>
    (head: { seq: number; hash: string }) => {
      const at = new Date().toISOString()
      let previous = head
      return targets.map((target, i) => {
        const record = chainRecord(MAC, previous, at, { ...call(`s${i}`, 't'), target })
        previous = record
        return record
      })
    }
  try {
    await store.append(batchOf('first'))
    // Targets joined by newlines, null as the empty string; then, with an empty-string target
    // or one with a newline, as arrays.
    await store.append(batchOf(undefined, 'a', undefined))
    await store.append(batchOf(undefined, '', 'b'))
    await store.append(batchOf('c\nd', undefined))
    const { rows } = await pool.query('SELECT seq, target FROM barbican_audit_records ORDER BY seq')
    assert.deepEqual(
      rows.map((r: { seq: string; target: string | null }) => [Number(r.seq), r.target]),
      [
        [1, 'first'],
        [2, null],
        [3, 'a'],
        [4, null],
        [5, null],
        [6, ''],
        [7, 'b'],
        [8, 'c\nd'],
        [9, null],
      ],
    )
  } finally {
    await store.close()
  }
})
