/**
 * The audit log a configuration opens on PostgreSQL (ADR 090): without `audit.journalDir` every
 * record commits before it settles; with one (from the file or BARBICAN_AUDIT_JOURNAL_DIR) the
 * batched mode journals there; and a second gateway given the same directory refuses to start.
 * The key (ADR 117): every replica of a fleet signs with BARBICAN_AUDIT_KEY and writes no key
 * file; a fleet without it refuses to start rather than let each replica make its own.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { call } from '../../test/contracts/audit.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { JournalInUseError } from '../audit/journal-lock.ts'
import { verifyAuditLog } from '../audit/verify.ts'
import { normalizeConfig } from '../config/normalize.ts'
import { silentLogger } from '../telemetry/log.ts'
import { auditLocationOf, openAuditLog, openAuditStore } from './audit-setup.ts'

after(dropPostgresSchemas)

const running = { log: silentLogger, running: true, stdoutFree: true }

async function configIn(
  dir: string,
  audit: Record<string, unknown>,
  env = {},
  url?: string,
  more: Record<string, unknown> = {},
) {
  const config = normalizeConfig(
    {
      upstreams: { echo: { command: 'true' } },
      store: { postgres: { url: url ?? (await freshPostgresUrl()) } },
      audit,
      ...more,
    },
    { baseDir: dir, env },
  )
  return { config, path: join(dir, 'barbican.yaml') }
}

describe('the audit log of a PostgreSQL configuration', () => {
  test('without a journal directory every record is committed before it settles', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-setup-'))
    const { config, path } = await configIn(dir, { durability: 'batched' })
    assert.equal(auditLocationOf(config, path).kind, 'postgres')
    assert.equal((auditLocationOf(config, path) as { journal?: string }).journal, undefined)
    const log = (await openAuditLog(config, path, running))!
    try {
      await log.record(call('alice', 'echo'))
      assert.equal((await log.store.read()).length, 1)
    } finally {
      await log.close()
    }
  })

  test('with one (relative to the config file) replies wait for the journal only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-setup-'))
    const { config, path } = await configIn(dir, {
      journalDir: 'journal',
      batchWindowMs: 10_000,
    })
    assert.equal(config.audit.journalDir, join(dir, 'journal'))
    const log = (await openAuditLog(config, path, running))!
    try {
      await log.record(call('alice', 'echo'))
      assert.equal((await log.store.read()).length, 0)
      assert.deepEqual(readdirSync(join(dir, 'journal')).sort(), [
        'audit-batch.0',
        'audit-batch.lock',
      ])
    } finally {
      await log.close()
    }
    assert.equal(existsSync(join(dir, 'journal', 'audit-batch.lock')), false, 'released')
  })

  test('a second gateway given the same directory refuses to start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-setup-'))
    const journalDir = join(dir, 'replica-a')
    const env = { BARBICAN_AUDIT_JOURNAL_DIR: journalDir }
    // The environment's directory wins over the file's.
    const first = await configIn(dir, { journalDir: 'elsewhere' }, env)
    assert.equal(first.config.audit.journalDir, journalDir)
    const second = await configIn(dir, {}, env)
    const log = (await openAuditLog(first.config, first.path, running))!
    try {
      await assert.rejects(openAuditLog(second.config, second.path, running), JournalInUseError)
    } finally {
      await log.close()
    }
    // Once the first has stopped, the directory is free again.
    const next = (await openAuditLog(second.config, second.path, running))!
    await next.close()
  })
})

describe('the audit key of replicas on PostgreSQL (ADR 117)', () => {
  const fleet = { redis: { url: 'redis://127.0.0.1:6379' } }
  const KEY = 'a1'.repeat(32)

  test('a fleet without BARBICAN_AUDIT_KEY refuses to start and writes nothing beside its config', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-key-'))
    const { config, path } = await configIn(dir, {}, {}, undefined, fleet)
    await assert.rejects(
      openAuditLog(config, path, { ...running, env: {} }),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, 'ERR_CONFIG_INVALID')
        assert.match(err.message, /BARBICAN_AUDIT_KEY is not set: the replicas of a fleet/)
        return true
      },
    )
    assert.deepEqual(readdirSync(dir), [])
  })

  test('replicas given the same key write one log that verifies, and no .barbican/', async () => {
    const url = await freshPostgresUrl()
    const env = { BARBICAN_AUDIT_KEY: KEY }
    const logs = []
    for (const name of ['a', 'b']) {
      const dir = mkdtempSync(join(tmpdir(), `barbican-audit-key-${name}-`))
      const { config, path } = await configIn(dir, {}, {}, url, fleet)
      const log = (await openAuditLog(config, path, { ...running, env }))!
      await log.record(call(`user-${name}`, 'echo'))
      logs.push({ dir, log })
    }
    for (const { log } of logs) await log.close()
    // What `barbican audit verify` does on any replica: the chain of both is under one key.
    const { config, path } = await configIn(logs[0]!.dir, {}, {}, url, fleet)
    const { store, key } = await openAuditStore(auditLocationOf(config, path, env), false)
    try {
      const report = await verifyAuditLog(store, key)
      assert.ok(report.ok, JSON.stringify(report.problem))
      assert.equal(report.records, 2)
      assert.equal(report.checkpoints, 2, 'each replica checkpointed at its close')
    } finally {
      await store.close()
    }
    for (const { dir } of logs) assert.deepEqual(readdirSync(dir), [])
  })

  test('a lone gateway on PostgreSQL keeps its key in .barbican/audit-key.pem', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-key-'))
    const { config, path } = await configIn(dir, {})
    const log = (await openAuditLog(config, path, { ...running, env: {} }))!
    await log.close()
    assert.deepEqual(readdirSync(join(dir, '.barbican')), ['audit-key.pem'])
  })

  test('a key that is not one is refused, naming the variable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-key-'))
    const { config, path } = await configIn(dir, {}, {}, undefined, fleet)
    await assert.rejects(
      openAuditLog(config, path, { ...running, env: { BARBICAN_AUDIT_KEY: 'too short' } }),
      /BARBICAN_AUDIT_KEY is not an audit key \(6 bytes, not 32\)/,
    )
  })
})
