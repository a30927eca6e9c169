/**
 * `barbican audit verify|tail|query`: checks and reads the audit log of a configuration. Only
 * reads: no checkpoint is signed and no key is created, so running it never changes what it
 * checks.
 */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { AuditQuery } from '../audit/audit-store.ts'
import { inspectJournals, type JournalReport } from '../audit/journal.ts'
import { type PublishedCheckpoints, readPublished } from '../audit/publish.ts'
import { exportLine } from '../audit/record.ts'
import { type VerifyReport, verifyAuditLog } from '../audit/verify.ts'
import { redactUrl } from '../common/backend-urls.ts'
import { DEFAULT_CONFIG_FILES } from '../config/defaults.ts'
import { demoStorePath } from '../config/demo-paths.ts'
import {
  type AuditLocation,
  auditBesideStore,
  auditLocationOf,
  givenAuditKey,
  openAuditStore,
} from '../gateway/audit-setup.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'

/**
 * Where the log is: the configuration's, or, with no --config and no config file here, the
 * embedded demo's (in its data folder), which `npm start` / `barbican serve` ran with; the
 * command says so, so that nobody mistakes it for their own gateway's log.
 */
async function locate(
  options: CommandOptions,
  io: CliIo,
): Promise<{ location: AuditLocation; publish?: string | undefined } | undefined> {
  const hasFile = DEFAULT_CONFIG_FILES.some((name) => existsSync(resolve(name)))
  if (options.config === undefined && !hasFile) {
    const store = demoStorePath()
    io.stderr(`barbican: no configuration here: reading the embedded demo's audit log\n`)
    return { location: auditBesideStore(store, undefined, givenAuditKey()) }
  }
  const loaded = await loadForCommand(options, io, false)
  if (!loaded) return undefined
  return {
    location: auditLocationOf(loaded.config, loaded.source.path),
    publish: loaded.config.audit.publishCheckpoints,
  }
}

/** What `tail` and `query` filter by (`--subject`, `--tool`, `--outcome`, `--since`, …). */
export interface AuditFilters {
  readonly subject?: string | undefined
  readonly tool?: string | undefined
  readonly outcome?: string | undefined
  readonly since?: string | undefined
  readonly until?: string | undefined
  readonly limit?: string | undefined
  /** verify: a file of published checkpoints to prove the log against (ADR 102). */
  readonly checkpoint?: string | undefined
}

const DEFAULT_TAIL = 20

export async function runAudit(
  options: CommandOptions,
  args: readonly string[],
  filters: AuditFilters,
  io: CliIo,
): Promise<number> {
  const [action] = args
  if (action !== 'verify' && action !== 'tail' && action !== 'query') {
    io.stderr(`barbican: audit needs an action: verify, tail or query\n`)
    return 2
  }
  if (filters.checkpoint !== undefined && action !== 'verify') {
    io.stderr('barbican: --checkpoint is for audit verify\n')
    return 2
  }
  let query: AuditQuery
  try {
    query = queryOf(action, filters)
  } catch (err) {
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 2
  }
  const located = await locate(options, io)
  if (!located) return 1
  const { location } = located
  if (location.kind === 'memory') {
    io.stderr('barbican: this configuration keeps its audit log in memory: nothing to read\n')
    return 1
  }
  if (location.kind === 'sqlite' && !existsSync(location.path)) {
    io.stderr(`barbican: no audit log at ${location.path}\n`)
    return 1
  }
  const where = location.kind === 'sqlite' ? location.path : redactUrl(location.url)
  let opened: Awaited<ReturnType<typeof openAuditStore>>
  try {
    opened = await openAuditStore(location, false)
  } catch (err) {
    io.stderr(`barbican: cannot open the audit log: ${(err as Error).message}\n`)
    return 1
  }
  const { store } = opened
  try {
    if (action === 'verify') {
      const published = filters.checkpoint ?? located.publish
      return await verify(opened, location, where, published, filters.checkpoint !== undefined, io)
    }
    const records = await store.read(query)
    if (action === 'tail') records.reverse()
    for (const r of records) io.stdout(`${exportLine(r)}\n`)
    return 0
  } finally {
    await store.close()
  }
}

/**
 * `audit verify`: the chain, the checkpoints, the published copies (`--checkpoint FILE`, else
 * the configured `audit.checkpoints.publish` when it exists) and the journals. Exit 1 when
 * anything does not verify; records after the last checkpoint are a warning, not a failure.
 */
async function verify(
  { store, key }: Awaited<ReturnType<typeof openAuditStore>>,
  location: Exclude<AuditLocation, { kind: 'memory' }>,
  where: string,
  publishedPath: string | undefined,
  asked: boolean,
  io: CliIo,
): Promise<number> {
  let published: PublishedCheckpoints | undefined
  if (publishedPath !== undefined && (asked || existsSync(publishedPath))) {
    try {
      published = readPublished(publishedPath)
    } catch (err) {
      io.stderr(`barbican: cannot read the published checkpoints: ${(err as Error).message}\n`)
      return 1
    }
    if (published.checkpoints.length === 0) {
      io.stdout(`FAIL  ${published.file} holds no published checkpoint\n`)
      return 1
    }
  }
  const r = await verifyAuditLog(store, key, { published: published?.checkpoints })
  // A batched gateway killed before its commit left its last calls in journals beside the
  // log (or in this replica's audit.journalDir): not in the chain yet, so verify says how
  // many wait, and names damaged lines.
  const journals =
    location.journal === undefined ? undefined : await inspectJournals(store, location.journal)
  const journalsOk = journals === undefined || journals.damage.every((d) => d.cut)
  if (!r.ok) {
    const p = r.problem!
    const what = p.checkpoint === undefined ? `record ${p.seq}` : `checkpoint ${p.checkpoint}`
    io.stdout(`FAIL  ${what}: ${p.reason}\n`)
    if (published) io.stdout(`      against ${published.file}\n`)
    if (journals) reportJournals(journals, io)
    io.stdout(`      ${where} (key ${key.keyId})\n`)
    return 1
  }
  const span = r.records === 0 ? 'no records' : `${r.records} record(s), ${r.firstSeq}–${r.lastSeq}`
  const last = r.lastCheckpoint
  io.stdout(
    `ok    ${span}; ${r.checkpoints} signed checkpoint(s)` +
      `${last ? `, the last (${last.reason}) at ${last.at} covering record ${last.seq}` : ''}\n`,
  )
  reportPublished(r, published, io)
  if (r.unsealed > 0) {
    const from = (r.lastSeq ?? 0) - r.unsealed + 1
    io.stdout(
      `warn  ${r.unsealed} record(s) after the last checkpoint (${from}–${r.lastSeq}) are ` +
        'unproven: they are keyed, but no signed checkpoint vouches for them yet, so their ' +
        'deletion would not be seen (the gateway is running, or stopped without its shutdown ' +
        'checkpoint)\n',
    )
  }
  if (journals) reportJournals(journals, io)
  io.stdout(`      ${where} (key ${key.keyId})\n`)
  return journalsOk ? 0 : 1
}

/** What the published checkpoints proved, or that none were given. */
function reportPublished(
  r: VerifyReport,
  published: PublishedCheckpoints | undefined,
  io: CliIo,
): void {
  const last = r.lastPublished
  if (published && last) {
    io.stdout(
      `ok    ${published.checkpoints.length} published checkpoint(s) in ${published.file} ` +
        `match the store; the last (number ${last.number}, ${last.reason}) covers record ` +
        `${last.seq}\n`,
    )
    return
  }
  io.stdout(
    'note  no published checkpoints (--checkpoint FILE, or audit.checkpoints.publish): the last ' +
      'records deleted together with their checkpoints would not be seen\n',
  )
}

/**
 * The journals' lines: waiting records are not an error (the next start adds them); a line that
 * does not parse is damage and fails verify, except a cut last line (its write was cut short,
 * so its call was refused or never answered: no acknowledged record is missing).
 */
function reportJournals(j: JournalReport, io: CliIo): void {
  if (j.pending > 0) {
    const next = 'the next start of the gateway adds them to the chain, in either durability mode'
    io.stdout(
      `note  ${j.pending} journalled record(s) in ${j.files} journal file(s) wait for replay, ` +
        `not in the chain yet: ${next}\n`,
    )
  }
  if (j.committed > 0) {
    io.stdout(
      `note  ${j.committed} journalled record(s) are in the chain already (the gateway stopped ` +
        'before removing their journal): the next start skips them\n',
    )
  }
  for (const d of j.damage) {
    io.stdout(
      d.cut
        ? `note  journal ${d.file}:${d.line}: a line cut short (disk full or machine crash); ` +
            'its call was refused or never answered, and the next start drops it\n'
        : `FAIL  journal ${d.file}:${d.line}: the line does not parse (damaged); the next start ` +
            'drops it\n',
    )
  }
}

function queryOf(action: 'verify' | 'tail' | 'query', f: AuditFilters): AuditQuery {
  const limit = f.limit === undefined ? undefined : Number(f.limit)
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) {
    throw new Error(`--limit must be a positive integer, not "${f.limit}"`)
  }
  return {
    subject: f.subject,
    target: f.tool,
    outcome: f.outcome,
    since: instant('--since', f.since),
    until: instant('--until', f.until),
    ...(action === 'tail' ? { newestFirst: true, limit: limit ?? DEFAULT_TAIL } : { limit }),
  }
}

/** An ISO 8601 time as stored (UTC, milliseconds), so that comparing strings compares times. */
function instant(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined
  const time = Date.parse(value)
  if (Number.isNaN(time)) throw new Error(`${flag} must be an ISO 8601 time, not "${value}"`)
  return new Date(time).toISOString()
}
