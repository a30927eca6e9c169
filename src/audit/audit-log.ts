/**
 * The audit log: appends events to the hash chain with group commit, signs checkpoints
 * (periodically, after pruning, and at close), prunes past the retention, and copies every
 * committed record to the export sink.
 *
 * Group commit: `record()` queues the event and returns a promise that settles once the record
 * is durable. Every event queued while one transaction runs goes into the next one, so under load
 * one fsync serves many calls (bench/audit.ts measures it) and a reply still never leaves before
 * its record is on disk. In batched mode (ADR 048, the embedded default since ADR 077) a record
 * settles once its line is in the journal file, every line of one event-loop turn in one write,
 * and the chain is extended from the journal every window.
 */

import { closeSync, openSync, rmSync, writeSync } from 'node:fs'
import type { LogExport } from '../telemetry/otel-logs.ts'
import { type AuditKey, signCheckpoint } from './audit-key.ts'
import type { AuditStore, Checkpoint, CheckpointReason } from './audit-store.ts'
import { committedBodies, journalFiles, readJournal } from './journal.ts'
import type { JournalLock } from './journal-lock.ts'
import {
  type AuditEvent,
  type AuditRecord,
  chainBody,
  chainRecord,
  exportFields,
  RecordKey,
  type Searchable,
  searchableOfEvent,
} from './record.ts'

/** Something that takes audit events; the policy and the admin commands write through it. */
export interface AuditSink {
  record(event: AuditEvent): Promise<void>
}

export interface AuditLogOptions {
  readonly store: AuditStore
  readonly key: AuditKey
  /** Receives one JSON line (with its newline) per committed record. */
  readonly export?: ExportSink | undefined
  /** Receives every committed record's fields as an OTel log record (telemetry/otel-logs.ts). */
  readonly logs?: LogExport | undefined
  /** 0: no periodic checkpoints (the CLI, tests). */
  readonly checkpointIntervalMs?: number | undefined
  /** Records older than this many days are pruned; 0 keeps everything. */
  readonly retentionDays?: number | undefined
  /** Most records in one transaction. */
  readonly maxBatch?: number | undefined
  readonly now?: () => Date
  /** Told about failures that no caller is waiting on (periodic checkpoint, prune). */
  readonly onError?: ((error: unknown) => void) | undefined
  /**
   * Batched durability (ADR 048): `record()` settles once the event is written to a journal
   * file beside the log (the OS has it: a killed process loses nothing), and events are
   * committed and fsynced every `windowMs`. Absent: every record is fsynced before it settles.
   */
  readonly batched?: { readonly journal: string; readonly windowMs: number } | undefined
  /** The journal directory's lock (journal-lock.ts), released when the log is closed. */
  readonly lock?: JournalLock | undefined
  /**
   * Copies every checkpoint this log signs outside the store, once it is committed (a file, the
   * log stream, the OTel export: publish.ts). Must not throw; failures go to `onError`.
   */
  readonly publish?: ((checkpoint: Checkpoint) => void) | undefined
}

/** Where exported lines go (a file, stdout); closed with the log. */
export interface ExportSink {
  write(line: string): void
  close?(): void
}

/**
 * An event on its way into the chain: the event itself, or (batched mode) only its journal line
 * and searchable fields, so that events waiting for their window hold no object graph the
 * garbage collector would have to promote and mark.
 */
type Entry =
  | { readonly event: AuditEvent }
  | { readonly body: string; readonly searchable: Searchable }

/** Entries waiting for one transaction, and whoever waits for them to be durable. */
interface Waiting {
  readonly entries: readonly Entry[]
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

const DAY_MS = 86_400_000

/** Batched mode: journalled events that start a commit without waiting for the window. */
const COMMIT_AT = 256

/** Opens journal number `n` for appending (mode 0600: it holds what the records hold). */
function openJournal(base: string, n: number): { path: string; fd: number } {
  const path = `${base}.${n}`
  return { path, fd: openSync(path, 'a', 0o600) }
}

export class AuditLog implements AuditSink {
  readonly #options: AuditLogOptions
  readonly #store: AuditStore
  /** The chain's MAC key (audit-key.ts): only its holder can extend the chain. */
  readonly #mac: RecordKey
  readonly #now: () => Date
  #queue: Waiting[] = []
  #draining = false
  #timer: NodeJS.Timeout | undefined
  /** Sequence number of the last record a checkpoint of this process covers. */
  #checkpointed = -1
  #closed = false
  /** Batched mode: the journal being written (`<journal>.<n>`) and its descriptor. */
  #journal: { path: string; fd: number } | undefined
  /** Batched mode: the number of the next journal file. */
  #journalNumber = 0
  /** Batched mode: journals closed after a failed write, removed by the next commit. */
  #retired: string[] = []
  #batchTimer: NodeJS.Timeout | undefined
  /** Batched mode: the timer set is the early commit of COMMIT_AT waiting events. */
  #commitDue = false
  /** Batched mode: events encoded this turn, for the next journal write, and their waiters. */
  #unwritten: { body: string; searchable: Searchable }[] = []
  #written:
    | { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void }
    | undefined
  /** Batched mode: events written to the journal (with their JSON), not committed yet. */
  #pending: { body: string; searchable: Searchable }[] = []

  constructor(options: AuditLogOptions) {
    this.#options = options
    this.#store = options.store
    if (!options.key.macKey)
      throw new Error('The audit key can only verify: it has no private half')
    this.#mac = new RecordKey(options.key.macKey)
    this.#now = options.now ?? (() => new Date())
    const every = options.checkpointIntervalMs ?? 0
    if (every > 0) {
      this.#timer = setInterval(() => {
        this.maintain().catch((err: unknown) => options.onError?.(err))
      }, every)
      this.#timer.unref()
    }
  }

  get store(): AuditStore {
    return this.#store
  }

  /** Appends `event`; settles when its record is durable (or rejects when it cannot be). */
  record(event: AuditEvent): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('The audit log is closed'))
    // Administrative acts are rare and an operator's act belongs in the chain at once: only
    // calls are journalled in batched mode.
    if (this.#options.batched && event.type === 'call') return this.#journalled(event)
    return new Promise((resolve, reject) => {
      this.#queue.push({ entries: [{ event }], resolve, reject })
      if (!this.#draining) {
        this.#draining = true
        // Let the other calls of this turn queue too: they share the transaction.
        setImmediate(() => void this.#drain())
      }
    })
  }

  /** Queues entries for the chain in transactions of at most `maxBatch`; settles when durable. */
  #append(entries: readonly Entry[]): Promise<unknown> {
    const max = this.#options.maxBatch ?? 1024
    const parts: Promise<void>[] = []
    for (let i = 0; i < entries.length; i += max) {
      const part = entries.length <= max ? entries : entries.slice(i, i + max)
      parts.push(
        new Promise((resolve, reject) => this.#queue.push({ entries: part, resolve, reject })),
      )
    }
    if (!this.#draining) {
      this.#draining = true
      void this.#drain()
    }
    return Promise.all(parts)
  }

  async #drain(): Promise<void> {
    const max = this.#options.maxBatch ?? 1024
    try {
      while (this.#queue.length > 0) {
        // Whole waiters, up to `max` entries (at least one waiter).
        let take = 1
        let count = this.#queue[0]!.entries.length
        while (take < this.#queue.length && count + this.#queue[take]!.entries.length <= max) {
          count += this.#queue[take]!.entries.length
          take++
        }
        const batch = this.#queue.splice(0, take)
        try {
          const at = this.#now().toISOString()
          const written = await this.#store.append((head) => {
            const records: AuditRecord[] = []
            let previous = head
            for (const w of batch) {
              for (const e of w.entries) {
                const r =
                  'event' in e
                    ? chainRecord(this.#mac, previous, at, e.event)
                    : chainBody(this.#mac, previous, at, e.body, e.searchable)
                records.push(r)
                previous = r
              }
            }
            return records
          })
          this.#export(written)
          for (const w of batch) w.resolve()
        } catch (err) {
          for (const w of batch) w.reject(err)
        }
      }
    } finally {
      this.#draining = false
    }
  }

  #export(records: readonly AuditRecord[]): void {
    const { export: sink, logs } = this.#options
    if (!sink && !logs) return
    for (const r of records) {
      try {
        const fields = exportFields(r)
        sink?.write(`${JSON.stringify(fields)}\n`)
        logs?.emit(fields)
      } catch (err) {
        this.#options.onError?.(err)
      }
    }
  }

  /**
   * Batched mode: the event is encoded once (the journal line is also the record's hashed body
   * at commit) and settles when the OS has its line. Every event recorded in one event-loop
   * iteration shares one `write(2)` (group write, in the check phase): under load one system
   * call serves many calls.
   */
  #journalled(event: AuditEvent): Promise<void> {
    let body: string
    try {
      body = JSON.stringify(event)
    } catch (err) {
      return Promise.reject(err)
    }
    this.#unwritten.push({ body, searchable: searchableOfEvent(event) })
    if (this.#written === undefined) {
      let resolve!: () => void
      let reject!: (e: unknown) => void
      const promise = new Promise<void>((yes, no) => {
        resolve = yes
        reject = no
      })
      this.#written = { promise, resolve, reject }
      // After every I/O callback of this event-loop iteration (the check phase): the replies
      // that arrived in one poll share one write(2). process.nextTick grouped only the records
      // of one callback, which on the → HTTP path is one call: a write per call (ADR 123).
      setImmediate(() => this.#writeJournal())
    }
    return this.#written.promise
  }

  /**
   * Writes the events of this turn to the journal in one `write(2)` (no fsync) and settles their
   * records. A failed or short write settles them with the error and retires the file, so the
   * next line never follows a cut one.
   */
  #writeJournal(): void {
    const entries = this.#unwritten
    const written = this.#written
    this.#unwritten = []
    this.#written = undefined
    if (entries.length === 0) {
      written?.resolve()
      return
    }
    try {
      let text = ''
      for (const e of entries) text += `${e.body}\n`
      this.#journal ??= openJournal(this.#options.batched!.journal, this.#journalNumber++)
      const bytes = writeSync(this.#journal.fd, text)
      const expected = Buffer.byteLength(text)
      if (bytes !== expected) {
        throw new Error(`short write to the audit journal: ${bytes} of ${expected} bytes`)
      }
    } catch (err) {
      if (this.#journal !== undefined) {
        closeSync(this.#journal.fd)
        this.#retired.push(this.#journal.path)
        this.#journal = undefined
      }
      written?.reject(err)
      return
    }
    for (const e of entries) this.#pending.push(e)
    // Committed at the end of the window, or as soon as COMMIT_AT events wait: lines held for
    // the whole window outlive the young generation, and promoting and marking them cost more
    // than a transaction per COMMIT_AT records (ADR 077).
    const due = this.#pending.length >= COMMIT_AT
    if (this.#batchTimer === undefined || (due && !this.#commitDue)) {
      if (this.#batchTimer !== undefined) clearTimeout(this.#batchTimer)
      this.#commitDue = due
      this.#batchTimer = setTimeout(
        () => {
          this.#batchTimer = undefined
          this.#commitDue = false
          this.#commitJournalled().catch((err: unknown) => this.#options.onError?.(err))
        },
        due ? 0 : this.#options.batched!.windowMs,
      )
      this.#batchTimer.unref()
    }
    written?.resolve()
  }

  /**
   * Commits the journalled events in transactions (fsynced), after closing the journal (the next
   * write opens a new file); the old one is removed once its events are durable in the store. A
   * crash between the commit and the removal leaves that journal for the next start, whose
   * replay skips the records the chain already has (journal.ts `committedBodies`).
   */
  async #commitJournalled(): Promise<void> {
    if (this.#unwritten.length > 0) this.#writeJournal()
    const entries = this.#pending
    if (entries.length === 0) return
    this.#pending = []
    const files = this.#retired
    this.#retired = []
    if (this.#journal !== undefined) {
      closeSync(this.#journal.fd)
      files.push(this.#journal.path)
      this.#journal = undefined
    }
    // On failure the journals stay, and are replayed at the next start.
    await this.#append(entries)
    for (const file of files) rmSync(file, { force: true })
  }

  /**
   * Replays journals a killed gateway left (batched mode), from `journal` (default: this log's
   * own; given when this log runs in fsync mode): their events are appended to the chain and the
   * files removed. Events the chain already has (the gateway died between a
   * commit and the journal's removal) are skipped, so a call is in the chain once. Returns how
   * many events were replayed.
   */
  async recoverJournal(journal = this.#options.batched?.journal): Promise<number> {
    if (journal === undefined) return 0
    let replayed = 0
    for (const path of journalFiles(journal)) {
      // Each line is replayed as written: it is the body that was acknowledged. A line that
      // does not parse was cut by the crash and never acknowledged: its reply was never sent.
      const journal = readJournal(path)
      const committed = await committedBodies(this.#store, journal)
      const events = journal.events.filter((e) => !committed.has(e.body))
      if (events.length > 0) await this.#append(events)
      rmSync(path, { force: true })
      replayed += events.length
    }
    return replayed
  }

  /** Waits until every event queued so far is written. */
  async flush(): Promise<void> {
    if (this.#batchTimer !== undefined) {
      clearTimeout(this.#batchTimer)
      this.#batchTimer = undefined
      this.#commitDue = false
    }
    await this.#commitJournalled()
    while (this.#draining || this.#queue.length > 0) {
      await new Promise((resolve) => setImmediate(resolve))
    }
  }

  /**
   * Signs a checkpoint for the current head, unless this process's last one covers it, chained
   * to the store's last checkpoint (ADR 102), and publishes it. An empty log has nothing to
   * attest: a gateway that stops before its first record (a port in use) signs nothing.
   */
  async checkpoint(reason: CheckpointReason, force = false): Promise<void> {
    const head = await this.#store.head()
    if (head.seq === 0) return
    if (!force && head.seq === this.#checkpointed) return
    const at = this.#now().toISOString()
    const key = this.#options.key
    const signed = await this.#store.addCheckpoint((current, last) =>
      signCheckpoint(key, { ...current, at, reason }, last),
    )
    this.#checkpointed = signed.seq
    this.#publish(signed)
  }

  #publish(checkpoint: Checkpoint): void {
    try {
      this.#options.publish?.(checkpoint)
    } catch (err) {
      this.#options.onError?.(err)
    }
  }

  /**
   * Removes records older than the retention, keeping the chain verifiable: the last removed
   * record's hash is kept in a signed `prune` checkpoint that the first remaining one follows.
   */
  async prune(): Promise<number> {
    const days = this.#options.retentionDays ?? 0
    if (days <= 0) return 0
    const cutoff = new Date(this.#now().getTime() - days * DAY_MS).toISOString()
    const old = await this.#store.read({ until: cutoff, newestFirst: true, limit: 1 })
    const last = old[0]
    // Records are written in time order, so everything up to the newest old one goes.
    if (!last) return 0
    const at = this.#now().toISOString()
    const key = this.#options.key
    const { removed, checkpoint } = await this.#store.prune(
      { seq: last.seq, hash: last.hash },
      (pruned, previous) => signCheckpoint(key, { ...pruned, at, reason: 'prune' }, previous),
    )
    this.#publish(checkpoint)
    return removed
  }

  /** What the timer does: prune, then a periodic checkpoint. */
  async maintain(): Promise<void> {
    await this.prune()
    await this.checkpoint('periodic')
  }

  /** Writes what is queued, signs the shutdown checkpoint and closes the store. */
  async close(): Promise<void> {
    if (this.#closed) return
    if (this.#timer) clearInterval(this.#timer)
    await this.flush()
    this.#closed = true
    try {
      await this.checkpoint('shutdown', true)
    } finally {
      if (this.#journal) {
        closeSync(this.#journal.fd)
        rmSync(this.#journal.path, { force: true })
        this.#journal = undefined
      }
      this.#options.export?.close?.()
      await this.#options.logs?.shutdown()
      try {
        await this.#store.close()
      } finally {
        // Last: until here this log may still have written to its journal.
        this.#options.lock?.release()
      }
    }
  }
}
