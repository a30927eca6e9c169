/**
 * The audit log a configuration opens on PostgreSQL (ADR 090): without `audit.journalDir` every
 * record commits before it settles; with one (from the file or BARBICAN_AUDIT_JOURNAL_DIR) the
 * batched mode journals there; and a second gateway given the same directory refuses to start.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { call } from '../../test/contracts/audit.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { JournalInUseError } from '../audit/journal-lock.ts'
import { normalizeConfig } from '../config/normalize.ts'
import { silentLogger } from '../telemetry/log.ts'
import { auditLocationOf, openAuditLog } from './audit-setup.ts'

after(dropPostgresSchemas)

const running = { log: silentLogger, running: true, stdoutFree: true }

async function configIn(dir: string, audit: Record<string, unknown>, env = {}) {
  const config = normalizeConfig(
    {
      upstreams: { echo: { command: 'true' } },
      store: { postgres: { url: await freshPostgresUrl() } },
      audit,
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
