/**
 * The one test suite every audit backend must pass, with the chain logic (audit-log.ts) and
 * `verify` on top, so a new backend (PostgreSQL) is done when this suite runs green against it.
 * `tamper` edits the stored log behind the backend's back, as an attacker with the file would.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkpointHash, ephemeralAuditKey } from '../../src/audit/audit-key.ts'
import { AuditLog } from '../../src/audit/audit-log.ts'
import type { AuditStore } from '../../src/audit/audit-store.ts'
import { type AuditEvent, legacyRecordHash } from '../../src/audit/record.ts'
import { verifyAuditLog } from '../../src/audit/verify.ts'

/** Raw edits of a stored log, in the backend's own terms. */
export interface Tamper {
  /** Replaces the body of record `seq`, leaving its hash. */
  editBody(seq: number, body: string): Promise<void>
  deleteRecord(seq: number): Promise<void>
  /** Swaps everything but the sequence numbers of two records. */
  swap(a: number, b: number): Promise<void>
  /** Deletes every record above `seq`. */
  truncateAfter(seq: number): Promise<void>
  /** Changes the indexed subject column of record `seq`, leaving its body. */
  setSubject(seq: number, subject: string): Promise<void>
  /** Deletes checkpoint number `number`. */
  deleteCheckpoint(number: number): Promise<void>
}

export interface Opened {
  readonly store: AuditStore
  readonly tamper: Tamper
}

export function call(
  subject: string,
  target: string,
  outcome: 'ok' | 'error' = 'ok',
  tenant?: string,
): AuditEvent {
  return {
    type: 'call',
    callId: `c-${subject}-${target}`,
    subject,
    ...(tenant === undefined ? {} : { tenant }),
    transport: 'streamable-http',
    server: 'default',
    upstream: 'files',
    method: 'tools/call',
    target,
    outcome,
    latencyMs: 1,
    decision: 'none',
  }
}

/** A test with a fresh log over a fresh store of the backend, closed after. */
type LogTest = (
  name: string,
  body: (log: AuditLog, opened: Opened, key: ReturnType<typeof ephemeralAuditKey>) => Promise<void>,
) => void

export function auditContract(backend: string, open: () => Promise<Opened>): void {
  const withLog = logTest(backend, open)
  storageCases(withLog)
  verifyCases(withLog)
  tamperCases(withLog)
  pruneCases(backend, open)
}

function logTest(backend: string, open: () => Promise<Opened>): LogTest {
  return (name, body) =>
    test(`${backend}: ${name}`, async () => {
      const opened = await open()
      const key = ephemeralAuditKey()
      const log = new AuditLog({ store: opened.store, key })
      try {
        await body(log, opened, key)
      } finally {
        await log.close()
      }
    })
}

async function fill(log: AuditLog, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, (_, i) => log.record(call(`u${i % 3}`, `t${i}`))))
}

/** What the store keeps and how it reads it back. */
function storageCases(withLog: LogTest): void {
  withLog(
    'appends records with consecutive numbers, each chained to the one before',
    async (log, { store }) => {
      await fill(log, 5)
      await log.record(call('u9', 'last'))
      const records = await store.read()
      assert.deepEqual(
        records.map((r) => r.seq),
        [1, 2, 3, 4, 5, 6],
      )
      for (let i = 1; i < records.length; i++)
        assert.equal(records[i]!.prevHash, records[i - 1]!.hash)
      assert.deepEqual(await store.head(), { seq: 6, hash: records[5]!.hash })
    },
  )

  withLog(
    'reads the records whose body is one of those given (the journal replay asks)',
    async (log, { store }) => {
      await fill(log, 4)
      const [one, , three] = await store.read()
      const bodies = [three!.body, one!.body, JSON.stringify(call('nobody', 'never'))]
      assert.deepEqual(
        (await store.read({ bodies })).map((r) => r.seq),
        [1, 3],
      )
      assert.deepEqual(
        (await store.read({ bodies, afterSeq: 1 })).map((r) => r.seq),
        [3],
      )
      // A body that differs by one character is another call.
      assert.deepEqual(await store.read({ bodies: [`${one!.body} `] }), [])
      assert.deepEqual(await store.read({ bodies: [] }), [])
    },
  )

  withLog(
    'reads by subject, target, outcome and time, oldest or newest first',
    async (log, { store }) => {
      await log.record(call('alice', 'read'))
      await log.record(call('bob', 'read', 'error'))
      await log.record(call('alice', 'write', 'error'))
      const subjects = (await store.read({ subject: 'alice' })).map((r) => r.seq)
      assert.deepEqual(subjects, [1, 3])
      assert.deepEqual(
        (await store.read({ target: 'read' })).map((r) => r.seq),
        [1, 2],
      )
      assert.deepEqual(
        (await store.read({ outcome: 'error' })).map((r) => r.seq),
        [2, 3],
      )
      assert.deepEqual(
        (await store.read({ newestFirst: true, limit: 2 })).map((r) => r.seq),
        [3, 2],
      )
      assert.deepEqual(
        (await store.read({ afterSeq: 1 })).map((r) => r.seq),
        [2, 3],
      )
      assert.equal((await store.read({ since: '2999-01-01T00:00:00.000Z' })).length, 0)
      // A tenant's calls only: admin acts and other tenants' calls are never in its view.
      await log.record(call('carol', 'read', 'ok', 'acme'))
      await log.record(call('dave', 'read', 'ok', 'globex'))
      assert.deepEqual(
        (await store.read({ tenant: 'acme' })).map((r) => r.seq),
        [4],
      )
      assert.deepEqual(
        (await store.read({ tenant: 'globex', newestFirst: true, limit: 5 })).map((r) => r.seq),
        [5],
      )
      assert.deepEqual(await store.read({ tenant: 'initech' }), [])
      assert.equal((await store.read({ until: '2000-01-01T00:00:00.000Z' })).length, 0)
    },
  )
}

/** `verify` on logs as they were written and as they were cut. */
function verifyCases(withLog: LogTest): void {
  withLog('an untouched log verifies, checkpoints included', async (log, { store }, key) => {
    await fill(log, 4)
    await log.checkpoint('periodic')
    await log.record(call('u', 'after'))
    const result = await verifyAuditLog(store, key)
    assert.equal(result.ok, true, result.problem?.reason)
    assert.equal(result.records, 5)
    assert.equal(result.unsealed, 1)
  })

  withLog('verify names an edited record', async (log, { store, tamper }, key) => {
    await fill(log, 5)
    await tamper.editBody(3, JSON.stringify(call('mallory', 't2')))
    const result = await verifyAuditLog(store, key)
    assert.equal(result.ok, false)
    assert.equal(result.problem?.seq, 3)
    assert.match(result.problem!.reason, /edited/)
  })

  withLog('verify names a deleted record', async (log, { store, tamper }, key) => {
    await fill(log, 5)
    await tamper.deleteRecord(2)
    const result = await verifyAuditLog(store, key)
    assert.equal(result.problem?.seq, 2)
    assert.match(result.problem!.reason, /deleted/)
  })

  withLog(
    'verify names the first of two reordered records',
    async (log, { store, tamper }, key) => {
      await fill(log, 5)
      await tamper.swap(3, 4)
      const result = await verifyAuditLog(store, key)
      assert.equal(result.problem?.seq, 3)
      assert.match(result.problem!.reason, /reordered/)
    },
  )

  withLog(
    'verify detects records cut from the tail through the shutdown checkpoint',
    async (log, { store, tamper }, key) => {
      await fill(log, 5)
      await log.checkpoint('shutdown')
      await tamper.truncateAfter(3)
      const result = await verifyAuditLog(store, key)
      assert.equal(result.problem?.seq, 4)
      assert.match(result.problem!.reason, /vouches for record 5/)
    },
  )

  withLog(
    'verify detects a rewritten chain through a signed checkpoint',
    async (log, { store, tamper }, key) => {
      await fill(log, 3)
      await log.checkpoint('periodic')
      // Without the key an attacker can recompute hashes but not the checkpoint's signature.
      await tamper.truncateAfter(0)
      const other = ephemeralAuditKey()
      const rewritten = new AuditLog({ store, key: other })
      await rewritten.record(call('x', 'y'))
      await rewritten.record(call('x', 'y'))
      await rewritten.record(call('x', 'y'))
      await rewritten.flush()
      const result = await verifyAuditLog(store, key)
      // Another key's MAC is not this key's: the first rewritten record already fails.
      assert.equal(result.problem?.seq, 1)
      assert.match(result.problem!.reason, /does not match its keyed hash/)
    },
  )
}

/** `verify` on logs edited behind the backend's back. */
function tamperCases(withLog: LogTest): void {
  withLog(
    'verify names a forged record appended with an unkeyed hash',
    async (log, { store }, key) => {
      await fill(log, 3)
      await log.checkpoint('shutdown')
      const head = await store.head()
      const at = new Date().toISOString()
      const body = JSON.stringify(call('mallory', 'forged'))
      const forged = {
        seq: head.seq + 1,
        at,
        prevHash: head.hash,
        hash: legacyRecordHash(head.seq + 1, at, head.hash, body),
        body,
      }
      await store.append(() => [forged])
      const result = await verifyAuditLog(store, key)
      assert.equal(result.problem?.seq, 4)
      assert.match(result.problem!.reason, /unkeyed SHA-256.*forged/)
    },
  )

  withLog('verify names an index column that disagrees with the body', async (log, opened, key) => {
    await fill(log, 4)
    await opened.tamper.setSubject(2, 'alice')
    const result = await verifyAuditLog(opened.store, key)
    assert.equal(result.problem?.seq, 2)
    assert.match(result.problem!.reason, /indexed column subject is "alice" but its body says "u1"/)
  })

  withLog(
    'checkpoints are numbered and chained; a missing one fails, a published one must be there',
    async (log, { store, tamper }, key) => {
      for (let i = 0; i < 3; i++) {
        await log.record(call('u', `t${i}`))
        await log.checkpoint('periodic')
      }
      const checkpoints = await store.checkpoints()
      assert.deepEqual(
        checkpoints.map((c) => c.number),
        [1, 2, 3],
      )
      assert.equal(checkpoints[1]!.prev, checkpointHash(checkpoints[0]!))
      const published = [checkpoints[2]!]
      assert.equal((await verifyAuditLog(store, key, { published })).ok, true)
      await tamper.deleteCheckpoint(2)
      const gap = await verifyAuditLog(store, key)
      assert.equal(gap.problem?.checkpoint, 3)
      assert.match(gap.problem!.reason, /checkpoint 2 is not in the store/)
      await tamper.deleteCheckpoint(3)
      await tamper.truncateAfter(1)
      // Without the published copy the shortened log looks whole; with it, it does not.
      assert.equal((await verifyAuditLog(store, key)).ok, true)
      const cut = await verifyAuditLog(store, key, { published })
      assert.equal(cut.problem?.checkpoint, 3)
      assert.match(cut.problem!.reason, /missing from the store/)
    },
  )

  withLog('a checkpoint signed by another key does not verify', async (log, { store }) => {
    await fill(log, 2)
    await log.checkpoint('periodic')
    const result = await verifyAuditLog(store, ephemeralAuditKey())
    assert.equal(result.ok, false)
    assert.match(result.problem!.reason, /not by this gateway's key/)
  })
}

/** Retention: pruning, and removals that are not prunes. */
function pruneCases(backend: string, open: () => Promise<Opened>): void {
  test(`${backend}: pruning past the retention keeps the rest verifiable`, async () => {
    const { store } = await open()
    const key = ephemeralAuditKey()
    let now = new Date('2026-01-01T00:00:00.000Z')
    const log = new AuditLog({ store, key, retentionDays: 30, now: () => now })
    try {
      await fill(log, 3)
      now = new Date('2026-03-01T00:00:00.000Z')
      await log.record(call('late', 'x'))
      assert.equal(await log.prune(), 3)
      assert.deepEqual(
        (await store.read()).map((r) => r.seq),
        [4],
      )
      await log.record(call('later', 'y'))
      const result = await verifyAuditLog(store, key)
      assert.equal(result.ok, true, result.problem?.reason)
      assert.equal(result.firstSeq, 4)
    } finally {
      await log.close()
    }
  })

  test(`${backend}: records removed from the head without a prune checkpoint are detected`, async () => {
    const { store, tamper } = await open()
    const key = ephemeralAuditKey()
    const log = new AuditLog({ store, key })
    try {
      await fill(log, 4)
      await tamper.deleteRecord(1)
      await tamper.deleteRecord(2)
      const result = await verifyAuditLog(store, key)
      assert.equal(result.problem?.seq, 1)
      assert.match(result.problem!.reason, /no signed prune checkpoint/)
    } finally {
      await log.close()
    }
  })
}
