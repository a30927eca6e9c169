/**
 * One gateway per journal directory (ADR 090). A gateway replays at its start every journal it
 * finds in its directory, as the journals of a gateway that died: a second live gateway
 * journalling into the same directory would have its acknowledged calls replayed by the first
 * while it still commits them itself, so they would enter the chain twice. So a gateway that
 * journals into a configured directory holds `<journal>.lock` there, naming its host and pid,
 * from before its replay until its log is closed, and a gateway that finds the lock held refuses
 * to start.
 *
 * A lock whose holder is gone is taken over: on the same host, when its pid no longer runs, or
 * runs a process started at another time (a reused pid), or is our own pid with another start
 * time (a container restarted after a kill: a new pid namespace where the gateway is pid 1
 * again, under the same hostname). A lock of another host is never taken over: from here nothing says whether that
 * gateway still runs, so the directory is refused and the message says what to check.
 */
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'

/** Who holds a journal directory. */
export interface JournalHolder {
  readonly host: string
  readonly pid: number
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat), where known. */
  readonly start?: number | undefined
}

/** A held lock; `release` removes it (only while it is still ours). */
export interface JournalLock {
  readonly path: string
  release(): void
}

/** Another gateway journals into this directory, or may: refused at start. */
export class JournalInUseError extends Error {
  override readonly name = 'JournalInUseError'
  readonly holder: JournalHolder

  constructor(path: string, holder: JournalHolder) {
    const elsewhere =
      holder.host === hostname()
        ? `process ${holder.pid} on this host still runs`
        : `it was taken on host ${holder.host} (process ${holder.pid}), and from here nothing ` +
          `says whether that gateway still runs; if that host is gone for good, remove ${path}`
    super(
      `the audit journal directory is in use by another gateway (${path}: ${elsewhere}). ` +
        'Give each replica its own audit.journalDir (BARBICAN_AUDIT_JOURNAL_DIR): two gateways ' +
        "journalling into one directory would replay each other's records (ADR 090).",
    )
    this.holder = holder
  }
}

/** The start time of process `pid` in clock ticks since boot, where /proc says. */
function startOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name is in parentheses and may hold spaces: count fields after its end.
    // Field 22 (starttime) is the 20th after the name.
    const field = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
    const start = Number(field)
    return Number.isFinite(start) ? start : undefined
  } catch {
    return undefined
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** This process, as a lock names it. */
export function thisGateway(): JournalHolder {
  return { host: hostname(), pid: process.pid, start: startOf(process.pid) }
}

/** Whether `holder`, as its lock names it, is certainly not running any more. */
function gone(holder: JournalHolder, self: JournalHolder): boolean {
  if (holder.host !== self.host) return false
  // Our own pid under our own hostname: a previous life of this gateway (a restarted container,
  // pid 1 again), unless it started when we did: then it is this very process, twice.
  if (holder.pid === self.pid) return holder.start === undefined || holder.start !== self.start
  if (!running(holder.pid)) return true
  const start = startOf(holder.pid)
  return holder.start !== undefined && start !== undefined && start !== holder.start
}

function readHolder(path: string): { text: string; holder: JournalHolder } | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
  const parsed = JSON.parse(text) as Partial<JournalHolder>
  if (typeof parsed.host !== 'string' || !Number.isInteger(parsed.pid)) {
    throw new Error(`${path} is not a journal lock; remove it if no gateway uses this directory`)
  }
  return { text, holder: parsed as JournalHolder }
}

/**
 * Takes the lock of the journal `base` (`<base>.lock`) for `self`, taking over a lock whose
 * holder is gone; throws JournalInUseError when another gateway may hold it.
 */
export function lockJournal(base: string, self: JournalHolder = thisGateway()): JournalLock {
  const path = `${base}.lock`
  const text = `${JSON.stringify(self)}\n`
  // Written whole to a file of our own, then linked into place: link(2) fails if the lock
  // exists, so a lock is never seen half written and two gateways never both take it.
  const draft = `${path}.${self.pid}.${process.hrtime.bigint()}`
  writeFileSync(draft, text, { mode: 0o600 })
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        linkSync(draft, path)
        return {
          path,
          release() {
            // Only our own: a lock someone took over after we were thought gone stays theirs.
            if (readHolder(path)?.text === text) rmSync(path, { force: true })
          },
        }
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      }
      const found = readHolder(path)
      if (found === undefined) continue
      if (!gone(found.holder, self)) throw new JournalInUseError(path, found.holder)
      // Moved aside, not removed: of two gateways taking over at once only one moves it, and
      // a lock that is not the one judged gone (just taken by another) is put back.
      const aside = `${draft}.stale`
      try {
        renameSync(path, aside)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue
        throw err
      }
      const moved = readHolder(aside)
      if (moved !== undefined && moved.text !== found.text) {
        try {
          linkSync(aside, path)
        } finally {
          rmSync(aside, { force: true })
        }
        throw new JournalInUseError(path, moved.holder)
      }
      rmSync(aside, { force: true })
    }
    throw new Error(`could not take ${path}: it keeps changing hands`)
  } finally {
    rmSync(draft, { force: true })
  }
}
