/**
 * `audit:` of the native format: where the audit log lives, what it keeps, how long, and where
 * its records are exported. Every key has a default; the log is on with no config at all
 * (docs/audit.md).
 */
import { z } from 'zod'

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

/** Overrides `audit.journalDir`: a directory per replica, given by its pod or unit (ADR 090). */
export const AUDIT_JOURNAL_DIR_ENV = 'BARBICAN_AUDIT_JOURNAL_DIR'

/** Overrides `audit.checkpoints.publish`: where the signed checkpoints are copied (ADR 102). */
export const AUDIT_CHECKPOINTS_PUBLISH_ENV = 'BARBICAN_AUDIT_CHECKPOINTS_PUBLISH'

export const AUDIT_DEFAULTS = Object.freeze({
  enabled: true,
  rawArguments: false,
  retentionDays: 0,
  checkpointIntervalMs: 60_000,
  durability: 'batched' as 'fsync' | 'batched',
  batchWindowMs: 200,
})

export const auditSchema = doc(
  z.strictObject({
    enabled: doc(
      z.boolean().default(AUDIT_DEFAULTS.enabled),
      'Enabled',
      'Record every call that reaches routing and every administrative act. Default: true.',
    ),
    path: doc(
      z.string().min(1).optional(),
      'Path',
      'SQLite file of the audit log; a relative path resolves against the config file ' +
        'directory. Default: audit.db beside the store file (.barbican/audit.db); in memory ' +
        'when the store is in memory. The signing key is audit-key.pem beside it.',
    ),
    rawArguments: doc(
      z.boolean().default(AUDIT_DEFAULTS.rawArguments),
      'Raw arguments',
      'Keep the arguments of each call (secret-looking keys masked, strings cut at 1024 ' +
        'characters), not only their SHA-256 digest. Default: false.',
    ),
    retentionDays: doc(
      z.int().min(0).max(36_500).default(AUDIT_DEFAULTS.retentionDays),
      'Retention (days)',
      'Records older than this are pruned, behind a signed checkpoint that keeps the rest ' +
        'verifiable. 0 keeps every record. Default: 0.',
    ),
    checkpointIntervalMs: doc(
      z.int().min(1000).max(86_400_000).default(AUDIT_DEFAULTS.checkpointIntervalMs),
      'Checkpoint interval (ms)',
      'How often the gateway signs a checkpoint of the chain (and prunes); one is always ' +
        'signed at graceful shutdown. Default: 60000.',
    ),
    durability: doc(
      z.enum(['fsync', 'batched']).default(AUDIT_DEFAULTS.durability),
      'Durability',
      'batched: a reply waits until its record is written to a journal file (a killed ' +
        'gateway loses nothing), and records are committed and fsynced every batchWindowMs, so ' +
        'a record is lost only if the machine itself dies within that window. fsync: a reply ' +
        'waits until its record is fsynced (group commit; more CPU per call). See ' +
        'docs/audit.md and ADR 077. Default: batched.',
    ),
    batchWindowMs: doc(
      z.int().min(1).max(10_000).default(AUDIT_DEFAULTS.batchWindowMs),
      'Batch window (ms)',
      'With durability batched: how long a record may wait for its commit and fsync (the ' +
        'most a machine crash can lose). ' +
        'Default: 200.',
    ),
    journalDir: doc(
      z.string().min(1).optional(),
      'Journal directory',
      'Where durability batched writes its journal (relative to the config file; ' +
        `${AUDIT_JOURNAL_DIR_ENV} overrides it), one directory per replica: a second gateway ` +
        'finding it in use refuses to start. SQLite: default beside audit.db. PostgreSQL: no ' +
        'default, and without one every reply waits for its record to commit in PostgreSQL ' +
        '(the fleet-safe default); with one, replies wait for the journal write and the ' +
        'records are committed every batchWindowMs. A killed replica replays its journal at ' +
        'its next start, so a journal that does not survive to that start loses up to one ' +
        'window of acknowledged records (docs/audit.md, ADR 090). Default: none.',
    ),
    export: doc(
      z
        .strictObject({
          file: doc(
            z.string().min(1).optional(),
            'File',
            'Append every record as one JSON line to this file (relative to the config file).',
          ),
          stdout: doc(
            z.boolean().default(false),
            'Stdout',
            'Write every record as one JSON line to stdout.',
          ),
        })
        .optional(),
      'Export',
      'JSON lines for a SIEM, with the field set of docs/audit.md. Default: none.',
    ),
    checkpoints: doc(
      z
        .strictObject({
          publish: doc(
            z.string().min(1).optional(),
            'Publish',
            'A file (or a directory, which then holds audit-checkpoints.jsonl) outside the ' +
              'store where every signed checkpoint is appended as one JSON line, relative to ' +
              `the config file; ${AUDIT_CHECKPOINTS_PUBLISH_ENV} overrides it. barbican audit ` +
              'verify proves the log against it (docs/audit.md "Threat model"). Default: none ' +
              '(checkpoints still go to the log stream and the OTel log export).',
          ),
        })
        .optional(),
      'Checkpoints',
      'Copies of the signed checkpoints kept outside the store (ADR 102).',
    ),
  }),
  'Audit',
  'The tamper-evident audit log (docs/audit.md). Default: on, beside the store.',
)
