/**
 * The batched mode's journal files as found on disk (ADR 077): `<log>-batch.<n>` beside the
 * SQLite log, or `audit-batch.<n>` in a configured `audit.journalDir` (ADR 090, the only place a
 * PostgreSQL replica journals), one JSON line per acknowledged call, left behind when a gateway died before
 * committing them. Read by the replay at the next start (audit-log.ts) and by `barbican audit
 * verify`, which reports them before that start: one reading, so both count the same lines.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import type { AuditStore } from './audit-store.ts'
import { type AuditEvent, type Searchable, searchableOfEvent } from './record.ts'

/** The journal a batched gateway writes beside the SQLite log at `logPath`. */
export function journalBeside(logPath: string): string {
  return `${logPath}-batch`
}

/** The journal a batched gateway writes in a configured journal directory (`audit.journalDir`). */
export function journalIn(dir: string): string {
  return join(dir, 'audit-batch')
}

/** A journal line that is not an event. */
export interface JournalDamage {
  readonly file: string
  /** 1-based. */
  readonly line: number
  /**
   * The file's last line, without its newline: a write cut short (disk full, machine crash).
   * Its call was refused or never answered, so it is not a lost record.
   */
  readonly cut: boolean
}

export interface JournalFile {
  readonly path: string
  /** Each line that parses, as written: the body that was acknowledged. */
  readonly events: readonly { readonly body: string; readonly searchable: Searchable }[]
  readonly damage: readonly JournalDamage[]
  /**
   * When the file was created, where the filesystem says (statx birth time); else when it was
   * last written, which bounds its records' commits as well: a journal is closed before its
   * records are committed (audit-log.ts `#commitJournalled`). Undefined if neither is known.
   */
  readonly createdAt: Date | undefined
}

/** The journal files of `base` (`<base>.<n>`), in the order they were written. */
export function journalFiles(base: string): string[] {
  const dir = dirname(base)
  const prefix = `${basename(base)}.`
  let names: string[]
  try {
    names = readdirSync(dir).filter(
      (n) => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length)),
    )
  } catch {
    return []
  }
  names.sort((a, b) => Number(a.slice(prefix.length)) - Number(b.slice(prefix.length)))
  return names.map((n) => join(dir, n))
}

export function readJournal(path: string): JournalFile {
  const text = readFileSync(path, 'utf8')
  const stat = statSync(path)
  const birth = stat.birthtimeMs > 0 ? stat.birthtimeMs : stat.mtimeMs
  const lines = text.split('\n')
  // A file that ends with its newline splits into a last empty string: no line there.
  const last = text.endsWith('\n') ? lines.length - 2 : lines.length - 1
  const events: { body: string; searchable: Searchable }[] = []
  const damage: JournalDamage[] = []
  lines.forEach((line, i) => {
    if (line.trim() === '') return
    try {
      const event = JSON.parse(line) as AuditEvent
      events.push({ body: line, searchable: searchableOfEvent(event) })
    } catch {
      damage.push({ file: path, line: i + 1, cut: i === last && !text.endsWith('\n') })
    }
  })
  return { path, events, damage, createdAt: birth > 0 ? new Date(birth) : undefined }
}

/**
 * The bodies of `journal`'s events that the chain already holds: a gateway that died between
 * committing a journal and removing it left them in both. Only records committed since the file
 * was created are read (a journalled record is committed after its line was written), and only
 * those whose body is one of the journal's (the store filters: on PostgreSQL, the records of the
 * whole fleet since then stay in the database). A body is
 * the whole event with its gateway-unique `callId`, so an equal body is the same call.
 */
export async function committedBodies(
  store: AuditStore,
  journal: JournalFile,
): Promise<Set<string>> {
  if (journal.createdAt === undefined || journal.events.length === 0) return new Set()
  // Record times are whole milliseconds; the creation time is finer.
  const since = new Date(Math.floor(journal.createdAt.getTime()) - 1).toISOString()
  const bodies = journal.events.map((e) => e.body)
  return new Set((await store.read({ since, bodies })).map((r) => r.body))
}

/** What `barbican audit verify` says about the journals beside a log before the next start. */
export interface JournalReport {
  readonly files: number
  /** Journalled records the chain lacks: the next start adds them. */
  readonly pending: number
  /** Journalled records the chain already has: the next start skips them. */
  readonly committed: number
  readonly damage: readonly JournalDamage[]
}

export async function inspectJournals(store: AuditStore, base: string): Promise<JournalReport> {
  let pending = 0
  let committed = 0
  const damage: JournalDamage[] = []
  const files = journalFiles(base)
  for (const path of files) {
    const journal = readJournal(path)
    const inChain = await committedBodies(store, journal)
    for (const e of journal.events) {
      if (inChain.has(e.body)) committed++
      else pending++
    }
    damage.push(...journal.damage)
  }
  return { files: files.length, pending, committed, damage }
}
