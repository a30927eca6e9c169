/**
 * The audit log in PostgreSQL (ADR 055, ADR 079), shared by every replica. The chain stays one
 * chain with several writers: every append writes under a transaction-scoped advisory lock and
 * builds on the head it finds there, so appends from all replicas are serialized in the database
 * and each builds on the record the previous one committed. A group commit (audit-log.ts) makes
 * one transaction, with one multi-row INSERT, per batch of calls: one round trip while this
 * replica still holds the head (a prepared call of `barbican_audit_append`, ADR 086), two when
 * another replica moved it. Durable when the transaction commits (the server's fsync), before
 * the promise settles.
 */
import type { Pool, PoolClient, QueryConfig } from 'pg'
import { inTransaction } from '../store/postgres-schema.ts'
import type {
  AuditQuery,
  AuditStore,
  ChainHead,
  Checkpoint,
  CheckpointBuilder,
} from './audit-store.ts'
import { bodyAgrees } from './query.ts'
import { type AuditRecord, GENESIS_HASH, searchableOf } from './record.ts'
import { checkpointOfRow, RECORD_COLUMNS, type Row, recordOfRow } from './sql-rows.ts'

/** The advisory lock key that serializes appends ("audi" in ASCII). */
const APPEND_LOCK = 0x61756469

const HEAD = `
  SELECT seq, hash FROM barbican_audit_records ORDER BY seq DESC LIMIT 1`
const PRUNE_HEAD = `
  SELECT seq, hash FROM barbican_audit_checkpoints WHERE reason = 'prune'
  ORDER BY seq DESC LIMIT 1`
/** The head in one statement: the last record, else what the last prune left. */
const HEAD_ONE = `
  SELECT seq, hash FROM ((${HEAD}) UNION ALL (${PRUNE_HEAD})) AS h ORDER BY seq DESC LIMIT 1`

/** The SQLSTATE `barbican_audit_append` fails with when the head moved (nothing written). */
const HEAD_MOVED = 'BA001'

/**
 * A prepared statement of the one-round-trip append (ADR 086): a constant text, parsed once per
 * connection, the rows bound as parameters. Each query is an object with only `values` of its
 * own, the name and text on its prototype: pg copies a query's config property by property
 * (pg/lib/utils.js cloneQueryConfig), and copies the prototype by reference.
 */
function preparedCall(name: string, text: string): (values: unknown[]) => QueryConfig {
  const constant = Object.freeze({ name, text })
  return (values) => {
    const query = Object.create(constant) as QueryConfig
    query.values = values
    return query
  }
}

/** A lone record (every batch at c=1): scalars in one-element arrays, its body sent as it is. */
const appendOne = preparedCall(
  'barbican_audit_append_one',
  `CALL barbican_audit_append($1::bigint, $2::text, ARRAY[$3::bigint], ARRAY[$4::text],
    ARRAY[$5::text], ARRAY[$6::text], ARRAY[$7::text], ARRAY[$8::text], ARRAY[$9::text],
    ARRAY[$10::text], ARRAY[$11::text])`,
)
/**
 * A batch, each column as its values joined (split by the server): pg sends a string parameter
 * as it is, where it would quote and escape every element of an array (a JSON body's every
 * quote; two regular-expression replaces per sequence number and per target). Texts are joined
 * by newlines, sequence numbers by commas, and targets by newlines with the empty string
 * standing for null. For batches where some text value has a newline, or a target is the empty
 * string, `appendMany`.
 */
const appendLines = preparedCall(
  'barbican_audit_append_lines',
  `CALL barbican_audit_append($1::bigint, $2::text, string_to_array($3::text, ',')::bigint[],
    string_to_array($4::text, E'\\n'), string_to_array($5::text, E'\\n'),
    string_to_array($6::text, E'\\n'), string_to_array($7::text, E'\\n', ''),
    string_to_array($8::text, E'\\n'), string_to_array($9::text, E'\\n'),
    string_to_array($10::text, E'\\n'), string_to_array($11::text, E'\\n'))`,
)
/** A batch: one array a column. */
const appendMany = preparedCall(
  'barbican_audit_append_many',
  `CALL barbican_audit_append($1::bigint, $2::text, $3::bigint[], $4::text[], $5::text[],
    $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])`,
)

const appendQuery = (guess: ChainHead, records: readonly AuditRecord[]) => {
  const n = records.length
  if (n === 1) {
    const r = records[0]!
    const s = r.searchable ?? searchableOf(r)
    return appendOne([
      guess.seq,
      guess.hash,
      r.seq,
      r.at,
      s.type,
      s.subject,
      s.target,
      s.outcome,
      r.prevHash,
      r.hash,
      r.body,
    ])
  }
  const seqs = new Array<number>(n)
  const ats = new Array<string>(n)
  const types = new Array<string>(n)
  const subjects = new Array<string>(n)
  const targets = new Array<string | null>(n)
  const outcomes = new Array<string>(n)
  const prevHashes = new Array<string>(n)
  const hashes = new Array<string>(n)
  const bodies = new Array<string>(n)
  for (let i = 0; i < n; i++) {
    const r = records[i]!
    const s = r.searchable ?? searchableOf(r)
    seqs[i] = r.seq
    ats[i] = r.at
    types[i] = s.type
    subjects[i] = s.subject
    targets[i] = s.target
    outcomes[i] = s.outcome
    prevHashes[i] = r.prevHash
    hashes[i] = r.hash
    bodies[i] = r.body
  }
  const columns = [ats, types, subjects, outcomes, prevHashes, hashes, bodies]
  if (
    columns.every((column) => column.every((v) => !v.includes('\n'))) &&
    targets.every((t) => t !== '' && !t?.includes('\n'))
  ) {
    return appendLines([
      guess.seq,
      guess.hash,
      seqs.join(','),
      ats.join('\n'),
      types.join('\n'),
      subjects.join('\n'),
      // join() writes null as the empty string, which the server reads back as null.
      targets.join('\n'),
      outcomes.join('\n'),
      prevHashes.join('\n'),
      hashes.join('\n'),
      bodies.join('\n'),
    ])
  }
  return appendMany([
    guess.seq,
    guess.hash,
    seqs,
    ats,
    types,
    subjects,
    targets,
    outcomes,
    prevHashes,
    hashes,
    bodies,
  ])
}

/**
 * In a transaction holding the append lock: the checkpoint `build` makes of `of` after the
 * last numbered one (ADR 102), stored. The lock also keeps the head still while it is signed.
 */
async function addCheckpointIn(
  client: PoolClient,
  of: ChainHead,
  build: CheckpointBuilder,
): Promise<Checkpoint> {
  const last = await client.query(
    `SELECT * FROM barbican_audit_checkpoints WHERE number IS NOT NULL
     ORDER BY number DESC LIMIT 1`,
  )
  const row = last.rows[0] as Row | undefined
  const c = build(of, row ? checkpointOfRow(row) : undefined)
  await client.query(
    `INSERT INTO barbican_audit_checkpoints
       (seq, hash, at, reason, key_id, signature, number, prev)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [c.seq, c.hash, c.at, c.reason, c.keyId, c.signature, c.number ?? null, c.prev ?? null],
  )
  return c
}

/**
 * The rows of `records` as an INSERT's VALUES list of escaped literals (simple protocol): the
 * locked path only, whose rows and COMMIT go in one message.
 */
function valuesOf(client: Pick<PoolClient, 'escapeLiteral'>, records: readonly AuditRecord[]) {
  const text = (v: string | null | undefined) =>
    v === null || v === undefined ? 'NULL' : client.escapeLiteral(v)
  return records
    .map((r) => {
      const s = r.searchable ?? searchableOf(r)
      const seq = Math.trunc(Number(r.seq))
      return `(${seq}, ${text(r.at)}, ${text(s.type)}, ${text(s.subject)}, ${text(s.target)}, ${text(s.outcome)}, ${text(r.prevHash)}, ${text(r.hash)}, ${text(r.body)})`
    })
    .join(', ')
}
function headOf(row: Row | undefined): ChainHead {
  return row ? { seq: Number(row.seq), hash: String(row.hash) } : { seq: 0, hash: GENESIS_HASH }
}

/** The records `query` asks for, read through `pool`. */
async function readRecords(pool: Pool, query: AuditQuery): Promise<AuditRecord[]> {
  const clauses: string[] = []
  const values: unknown[] = []
  const where = (column: string, op: string, value: unknown) => {
    if (value === undefined) return
    values.push(value)
    clauses.push(
      op === '= ANY' ? `${column} = ANY($${values.length})` : `${column} ${op} $${values.length}`,
    )
  }
  where('seq', '>', query.afterSeq)
  where('subject', '=', query.subject)
  where("(body::jsonb ->> 'tenant')", '=', query.tenant)
  where('target', '=', query.target)
  where('outcome', '=', query.outcome)
  where('at', '>=', query.since)
  where('at', '<=', query.until)
  where('body', '= ANY', query.bodies)
  const sql =
    `SELECT ${RECORD_COLUMNS} FROM barbican_audit_records` +
    (clauses.length > 0 ? ` WHERE ${clauses.join(' AND ')}` : '') +
    ` ORDER BY seq ${query.newestFirst ? 'DESC' : 'ASC'}` +
    (query.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(query.limit))}`)
  const records = ((await pool.query(sql, values)).rows as Row[]).map(recordOfRow)
  // The columns are an index; the hashed body is the truth a record is returned on.
  return records.filter((r) => bodyAgrees(r, query))
}

/** The head, checkpointed by `build`, under the append lock (ADR 102). */
function checkpointUnderLock(pool: Pool, build: CheckpointBuilder): Promise<Checkpoint> {
  return inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [APPEND_LOCK])
    const head = headOf((await client.query(HEAD_ONE)).rows[0] as Row | undefined)
    return addCheckpointIn(client, head, build)
  })
}

async function readCheckpoints(pool: Pool): Promise<Checkpoint[]> {
  const result = await pool.query('SELECT * FROM barbican_audit_checkpoints ORDER BY seq, at, id')
  return (result.rows as Row[]).map(checkpointOfRow)
}

/** Deletes the records up to `last` and checkpoints it, in one transaction. */
function pruneUnderLock(
  pool: Pool,
  last: ChainHead,
  build: CheckpointBuilder,
): Promise<{ removed: number; checkpoint: Checkpoint }> {
  return inTransaction(pool, async (client) => {
    // Under the append lock: a prune never races an append reading the head.
    await client.query('SELECT pg_advisory_xact_lock($1)', [APPEND_LOCK])
    const deleted = await client.query('DELETE FROM barbican_audit_records WHERE seq <= $1', [
      last.seq,
    ])
    const checkpoint = await addCheckpointIn(client, last, build)
    return { removed: deleted.rowCount ?? 0, checkpoint }
  })
}

/**
 * The connection appends use, kept checked out between them: AuditLog appends one batch at a
 * time, so a batch costs no pool checkout, release and idle timer. Another append under way at
 * the same time borrows from the pool as before. Dropped (and closed) on a connection error,
 * whether in a query or while it waits.
 */
class KeptConnection {
  readonly #pool: Pool
  #kept: PoolClient | undefined
  #closed = false
  readonly #watched = new WeakSet<PoolClient>()

  constructor(pool: Pool) {
    this.#pool = pool
  }

  async take(): Promise<PoolClient> {
    const client = this.#kept ?? (await this.#pool.connect())
    this.#kept = undefined
    if (!this.#watched.has(client)) {
      this.#watched.add(client)
      // A checked-out client has no listener of the pool's: without one, the error event of
      // a connection the server closed while it waits here would end the process.
      client.on('error', (err) => {
        if (this.#kept !== client) return
        this.#kept = undefined
        client.release(err)
      })
    }
    return client
  }

  keep(client: PoolClient, err?: unknown): void {
    // An error of the server's (it has a SQLSTATE) leaves the connection usable; any other
    // (a broken socket, a timeout) may not, so the pool closes that connection.
    const broken = err !== undefined && typeof (err as { code?: unknown }).code !== 'string'
    if (broken || this.#kept !== undefined || this.#closed) {
      client.release(broken ? (err as Error) : undefined)
    } else this.#kept = client
  }

  close(): void {
    this.#closed = true
    this.#kept?.release()
    this.#kept = undefined
  }
}

/** The audit store over an open pool (store/postgres.ts openPostgresPool); `ownsPool`: close ends it. */
export function postgresAuditStore(pool: Pool, ownsPool: boolean): AuditStore {
  /**
   * The head this store committed last: while no other writer has appended since, the next
   * batch builds on it and goes in one round trip (`appendOn`). Undefined until the first append.
   */
  let held: ChainHead | undefined
  /**
   * Another writer moved the head since this store last wrote: appends take the locked path,
   * whose head read tells when this store holds the head again (then `appendOn` is worth trying).
   */
  let contended = false

  const connection = new KeptConnection(pool)
  let closed = false

  /**
   * One round trip: builds on `guess` and calls `barbican_audit_append` (schema migration 3,
   * ADR 086) through a statement prepared once per connection, the rows as parameters: no SQL
   * text is built or escaped per record. The procedure takes the append lock, reads the head
   * with a snapshot taken after the lock is granted, and inserts the rows only when the head is
   * still `guess`, all in the implicit transaction of the one message (rolled back whole on an
   * error). Returns the rows written, or undefined when the head had moved on (nothing written).
   */
  const appendOn = async (
    guess: ChainHead,
    build: (head: ChainHead) => readonly AuditRecord[],
  ): Promise<readonly AuditRecord[] | undefined> => {
    const added = build(guess)
    if (added.length === 0) return added
    const query = appendQuery(guess, added)
    const client = await connection.take()
    try {
      await client.query(query)
    } catch (err) {
      connection.keep(client, err)
      if ((err as { code?: unknown }).code === HEAD_MOVED) return undefined
      throw err
    }
    connection.keep(client)
    return added
  }

  /**
   * Two round trips that always succeed: lock and head, then rows and COMMIT, with the lock
   * held in between (the first append of a process, and under contention). Whether the head
   * it finds is the one this store wrote last decides whether the next append tries `appendOn`.
   */
  const appendLocked = async (build: (head: ChainHead) => readonly AuditRecord[]) => {
    const client = await connection.take()
    try {
      const opened = (await client.query(
        `BEGIN; SELECT pg_advisory_xact_lock(${APPEND_LOCK}); ${HEAD_ONE}`,
      )) as unknown as { rows: Row[] }[]
      const head = headOf(opened[2]?.rows[0])
      contended = held !== undefined && (head.seq !== held.seq || head.hash !== held.hash)
      const added = build(head)
      if (added.length === 0) {
        await client.query('COMMIT')
      } else {
        await client.query(
          `INSERT INTO barbican_audit_records
             (seq, at, type, subject, target, outcome, prev_hash, hash, body)
           VALUES ${valuesOf(client, added)}; COMMIT`,
        )
      }
      connection.keep(client)
      return added
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {})
      connection.keep(client, err)
      throw err
    }
  }

  return {
    async append(build) {
      // On the head this replica last wrote, in one round trip; when another replica had moved
      // it (that try wrote nothing), and while others keep moving it, under the lock in two.
      if (held !== undefined && !contended) {
        const added = await appendOn(held, build)
        if (added !== undefined) {
          held = added.at(-1) ?? held
          return added
        }
        contended = true
      }
      const added = await appendLocked(build)
      held = added.at(-1) ?? held
      return added
    },
    async head() {
      return headOf((await pool.query(HEAD_ONE)).rows[0] as Row | undefined)
    },
    read: (query: AuditQuery = {}) => readRecords(pool, query),
    addCheckpoint: (build) => checkpointUnderLock(pool, build),
    checkpoints: () => readCheckpoints(pool),
    prune: (last, build) => pruneUnderLock(pool, last, build),
    async close() {
      if (closed) return
      closed = true
      connection.close()
      if (ownsPool) await pool.end()
    },
  }
}
