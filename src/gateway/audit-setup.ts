/**
 * Opens the audit log a configuration asks for and installs the `audit` policy in a gateway
 * plan. By default the log is `audit.db` beside the store file, signed with `audit-key.pem`
 * beside it; with a memory store it lives in memory with a key for this process only. With
 * `BARBICAN_AUDIT_KEY` the key comes from there and no key file is read or written (ADR 117).
 * The batched mode's journal is beside audit.db, or in `audit.journalDir` (the only place a
 * PostgreSQL replica journals: ADR 090).
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import {
  AUDIT_KEY_ENV,
  type AuditKey,
  auditKeyFromText,
  ephemeralAuditKey,
  loadAuditKey,
} from '../audit/audit-key.ts'
import { AuditLog, type ExportSink } from '../audit/audit-log.ts'
import type { AuditStore, Checkpoint } from '../audit/audit-store.ts'
import { journalBeside, journalIn } from '../audit/journal.ts'
import { type JournalLock, lockJournal } from '../audit/journal-lock.ts'
import { memoryAuditStore } from '../audit/memory.ts'
import { publishedFields, publishToFile } from '../audit/publish.ts'
import { openSqliteAuditStore } from '../audit/sqlite.ts'
import { BarbicanError } from '../common/errors.ts'
import type { Config } from '../config/config.ts'
import { DEFAULT_STORE_PATH } from '../config/defaults.ts'
import { auditPolicy } from '../policies/audit.ts'
import type { Logger } from '../telemetry/log.ts'
import { type LogExport, startLogExport } from '../telemetry/otel-logs.ts'
import type { GatewayPlan } from './gateway.ts'
import { storeConfigOf } from './trust-setup.ts'

export const AUDIT_FILE = 'audit.db'
export const AUDIT_KEY_FILE = 'audit-key.pem'

/**
 * Where the audit key comes from (ADR 117): `BARBICAN_AUDIT_KEY`, a PEM file (made on first
 * start when missing), or nowhere: a fleet on PostgreSQL without the variable, whose replicas
 * would each make a key of their own (`missing` says what to do).
 */
export type AuditKeySource =
  | { readonly text: string }
  | { readonly path: string }
  | { readonly missing: string }

/**
 * Where the audit log of a configuration is kept. `journal`: where the batched mode journals and
 * what a start replays (journal.ts), if anywhere: beside the SQLite file unless
 * `audit.journalDir` says otherwise; for PostgreSQL only in `audit.journalDir`.
 */
export type AuditLocation =
  | { readonly kind: 'memory' }
  | {
      readonly kind: 'sqlite'
      readonly path: string
      readonly key: AuditKeySource
      readonly journal: string
    }
  /** In the PostgreSQL store's database; the key is never there (it would forge the chain). */
  | {
      readonly kind: 'postgres'
      readonly url: string
      readonly migrate: boolean
      readonly key: AuditKeySource
      readonly journal?: string | undefined
    }

export function auditLocationOf(
  config: Config,
  configPath: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): AuditLocation {
  const { journalDir } = config.audit
  const journal = journalDir === undefined ? undefined : journalIn(journalDir)
  const given = givenAuditKey(env)
  if (config.audit.path !== undefined) {
    return {
      kind: 'sqlite',
      path: config.audit.path,
      key: given ?? { path: join(dirname(config.audit.path), AUDIT_KEY_FILE) },
      journal: journal ?? journalBeside(config.audit.path),
    }
  }
  const store = storeConfigOf(config, configPath)
  if (store.kind === 'memory') return { kind: 'memory' }
  if (store.kind === 'postgres') {
    const base = configPath === undefined ? process.cwd() : dirname(configPath)
    const file = { path: join(base, dirname(DEFAULT_STORE_PATH), AUDIT_KEY_FILE) }
    // Replicas share the log, so they must share its key: a file each would make one each.
    const key = given ?? (config.redis === undefined ? file : { missing: FLEET_WITHOUT_KEY })
    return { kind: 'postgres', url: store.url, migrate: store.migrate, key, journal }
  }
  return auditBesideStore(store.path, journal, given)
}

/** The key `BARBICAN_AUDIT_KEY` gives, if set: it wins over any key file. */
export function givenAuditKey(env: NodeJS.ProcessEnv = process.env): AuditKeySource | undefined {
  const text = env[AUDIT_KEY_ENV]
  return text?.trim() ? { text } : undefined
}

const FLEET_WITHOUT_KEY =
  `${AUDIT_KEY_ENV} is not set: the replicas of a fleet write one audit log in PostgreSQL and ` +
  'must all sign it with the same key (docs/deploy.md). Give every replica the same value: ' +
  '64 hex digits (openssl rand -hex 32), or the content of the audit-key.pem a replica made before'

/** The SQLite audit log beside a SQLite store file (`audit.db`, its key, its journals). */
export function auditBesideStore(
  storePath: string,
  journal?: string,
  key?: AuditKeySource,
): AuditLocation {
  const dir = dirname(storePath)
  const path = join(dir, AUDIT_FILE)
  return {
    kind: 'sqlite',
    path,
    key: key ?? { path: join(dir, AUDIT_KEY_FILE) },
    journal: journal ?? journalBeside(path),
  }
}

/** The audit key from its source; `create` makes a key file when it does not exist yet. */
export function auditKeyAt(source: AuditKeySource, create: boolean): AuditKey {
  if ('text' in source) return auditKeyFromText(source.text)
  if ('missing' in source) throw new BarbicanError('ERR_CONFIG_INVALID', source.missing)
  return loadAuditKey(source.path, create)
}

/** The store and key at a location; `create` makes the key when it does not exist yet. */
export async function openAuditStore(
  location: AuditLocation,
  create: boolean,
): Promise<{ store: AuditStore; key: AuditKey }> {
  if (location.kind === 'memory') return { store: memoryAuditStore(), key: ephemeralAuditKey() }
  const key = auditKeyAt(location.key, create)
  if (location.kind === 'postgres') {
    const [{ openPostgresPool }, { postgresAuditStore }] = await Promise.all([
      import('../store/postgres.ts'),
      import('../audit/postgres.ts'),
    ])
    const pool = await openPostgresPool(location.url, { migrate: location.migrate })
    return { store: postgresAuditStore(pool, true), key }
  }
  return { store: await openSqliteAuditStore(location.path), key }
}

export interface OpenAuditOptions {
  readonly log: Logger
  /** The gateway signs periodic checkpoints and prunes; a CLI command does neither. */
  readonly running: boolean
  /** False for `barbican stdio`, whose stdout carries JSON-RPC. */
  readonly stdoutFree: boolean
  /** Where OTEL_* and BARBICAN_AUDIT_KEY are read; process.env by default. */
  readonly env?: NodeJS.ProcessEnv | undefined
}

/** The audit log of `config`, or undefined when `audit.enabled` is false. */
export async function openAuditLog(
  config: Config,
  configPath: string | undefined,
  options: OpenAuditOptions,
): Promise<AuditLog | undefined> {
  if (!config.audit.enabled) return undefined
  const exported = config.audit.export
  if (exported?.stdout && !options.stdoutFree) {
    throw new Error(
      'audit.export.stdout cannot be used here: stdout carries JSON-RPC. Use audit.export.file.',
    )
  }
  const location = auditLocationOf(config, configPath, options.env)
  // First: a refused directory (ADR 090) starts nothing.
  const lock = options.running ? lockJournalDir(config) : undefined
  let logs: Awaited<ReturnType<typeof startLogExport>>
  let opened: Awaited<ReturnType<typeof openAuditStore>>
  try {
    // Only a running gateway exports; CLI commands that write an admin record do not.
    logs = options.running
      ? await startLogExport(options.env ?? process.env, options.log)
      : undefined
    opened = await openAuditStore(location, true)
  } catch (err) {
    lock?.release()
    throw err
  }
  const { store, key } = opened
  const journal = batchedJournal(config, location, options)
  const log = new AuditLog({
    store,
    key,
    export: options.running ? exportSink(exported) : undefined,
    logs,
    checkpointIntervalMs: options.running ? config.audit.checkpointIntervalMs : 0,
    retentionDays: config.audit.retentionDays,
    onError: (error) => options.log.error('audit maintenance failed', { error }),
    ...(journal ? { batched: { journal, windowMs: config.audit.batchWindowMs } } : {}),
    lock,
    publish: checkpointPublisher(config, options.log, logs),
  })
  if (options.running) {
    // Journals are replayed whatever the mode now configured: a gateway that died in batched
    // mode and restarts in fsync mode must not strand the calls it acknowledged.
    const replayed =
      location.kind === 'memory' || location.journal === undefined
        ? 0
        : await log.recoverJournal(location.journal).catch(async (err: unknown) => {
            await log.close().catch(() => {})
            throw err
          })
    if (replayed > 0) {
      options.log.warn('audit records replayed from the journal of a gateway that died', {
        records: replayed,
      })
    }
    await log.prune()
  }
  return log
}

/**
 * Where each signed checkpoint is copied outside the store (ADR 102): the configured file, the
 * log stream (one info line), and the OTel log export when it runs. A copy that cannot be written
 * is logged as an error; the checkpoint stays in the store.
 */
function checkpointPublisher(
  config: Config,
  log: Logger,
  logs: LogExport | undefined,
): (checkpoint: Checkpoint) => void {
  const file = config.audit.publishCheckpoints
  const toFile = file === undefined ? undefined : publishToFile(file)
  return (checkpoint) => {
    const fields = publishedFields(checkpoint)
    log.info('audit checkpoint', { checkpoint: fields })
    logs?.emit(fields)
    try {
      toFile?.(checkpoint)
    } catch (error) {
      log.error('the audit checkpoint could not be published to its file', { file, error })
    }
  }
}

/**
 * Where batched mode journals; undefined for the fsync mode, a CLI command (it writes one admin
 * record, durably), a log in memory (nothing survives anyway) or PostgreSQL without
 * `audit.journalDir` (a replica then commits before every reply: without a directory given to
 * it alone, a journal could not be trusted to reach its next start; ADR 090).
 */
function batchedJournal(
  config: Config,
  location: AuditLocation,
  options: OpenAuditOptions,
): string | undefined {
  if (config.audit.durability !== 'batched' || !options.running) return undefined
  return location.kind === 'memory' ? undefined : location.journal
}

/**
 * A configured journal directory is one gateway's (ADR 090): made if missing, and locked from
 * before the replay until the log closes, so that a second gateway given the same directory
 * refuses to start instead of replaying live journals. The default beside audit.db is not
 * locked: several local gateways (`serve` beside `stdio` ones) may share one SQLite log.
 */
function lockJournalDir(config: Config): JournalLock | undefined {
  const dir = config.audit.journalDir
  if (dir === undefined) return undefined
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return lockJournal(journalIn(dir))
}

function exportSink(exported: Config['audit']['export']): ExportSink | undefined {
  const sinks: ExportSink[] = []
  if (exported?.file !== undefined) {
    const fd = openSync(exported.file, 'a', 0o600)
    sinks.push({ write: (line) => void writeSync(fd, line), close: () => closeSync(fd) })
  }
  if (exported?.stdout) sinks.push({ write: (line) => void process.stdout.write(line) })
  if (sinks.length === 0) return undefined
  return {
    write: (line) => {
      for (const s of sinks) s.write(line)
    },
    close: () => {
      for (const s of sinks) s.close?.()
    },
  }
}

/** The plan with the `audit` policy installed (outermost: policies/chain.ts ORDER). */
export function withAudit(
  plan: GatewayPlan,
  audit: AuditLog | undefined,
  config: Config,
): GatewayPlan {
  if (!audit) return plan
  const policy = auditPolicy({ sink: audit, rawArguments: config.audit.rawArguments })
  return { ...plan, policies: [policy, ...(plan.policies ?? [])] }
}
