/**
 * One gateway per journal directory (ADR 090): the lock names its holder, refuses a second
 * gateway while the holder may run, and is taken over when the holder is certainly gone.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { JournalInUseError, lockJournal, thisGateway } from './journal-lock.ts'

const base = () => join(mkdtempSync(join(tmpdir(), 'barbican-journal-lock-')), 'audit-batch')

/** A process that runs until killed: a live holder on this host that is not this process. */
function sleeper(): { pid: number; kill(): Promise<void> } {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
  return {
    pid: child.pid!,
    kill: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve())
        child.kill('SIGKILL')
      }),
  }
}

describe('the journal directory lock', () => {
  test('names its holder, and is removed when released', () => {
    const journal = base()
    const lock = lockJournal(journal)
    const held = JSON.parse(readFileSync(`${journal}.lock`, 'utf8'))
    assert.equal(held.host, hostname())
    assert.equal(held.pid, process.pid)
    lock.release()
    assert.equal(existsSync(`${journal}.lock`), false)
  })

  test('a second gateway on this host is refused while the first runs', async () => {
    const journal = base()
    const first = sleeper()
    try {
      lockJournal(journal, { ...thisGateway(), pid: first.pid, start: undefined })
      assert.throws(
        () => lockJournal(journal),
        (err: unknown) =>
          err instanceof JournalInUseError &&
          err.holder.pid === first.pid &&
          err.message.includes(`process ${first.pid} on this host still runs`) &&
          err.message.includes('its own audit.journalDir'),
      )
      // The refused gateway leaves the lock as it was.
      assert.equal(JSON.parse(readFileSync(`${journal}.lock`, 'utf8')).pid, first.pid)
    } finally {
      await first.kill()
    }
    // Once it is gone, its lock is taken over.
    const lock = lockJournal(journal)
    assert.equal(JSON.parse(readFileSync(`${journal}.lock`, 'utf8')).pid, process.pid)
    lock.release()
  })

  test("another host's lock is never taken over, and the message says what to check", () => {
    const journal = base()
    writeFileSync(`${journal}.lock`, JSON.stringify({ host: 'replica-7', pid: 1 }))
    assert.throws(
      () => lockJournal(journal),
      (err: unknown) =>
        err instanceof JournalInUseError &&
        err.message.includes('taken on host replica-7') &&
        err.message.includes(`remove ${journal}.lock`),
    )
  })

  test('our own pid under our hostname is a previous life (a restarted container)', () => {
    const journal = base()
    writeFileSync(
      `${journal}.lock`,
      JSON.stringify({ host: hostname(), pid: process.pid, start: 1 }),
    )
    const lock = lockJournal(journal)
    assert.equal(JSON.parse(readFileSync(`${journal}.lock`, 'utf8')).start, thisGateway().start)
    lock.release()
  })

  test('a live pid that started at another time is a reused pid: taken over', () => {
    const journal = base()
    // The parent runs, but the lock says it started at another time than it did.
    writeFileSync(
      `${journal}.lock`,
      JSON.stringify({ host: hostname(), pid: process.ppid, start: 1 }),
    )
    const lock = lockJournal(journal)
    assert.equal(JSON.parse(readFileSync(`${journal}.lock`, 'utf8')).pid, process.pid)
    lock.release()
  })

  test('a release after a takeover leaves the new holder its lock', () => {
    const journal = base()
    const old = lockJournal(journal, { host: hostname(), pid: 2 ** 22 + 1 })
    // pid 2^22+1 is above Linux's pid_max: certainly gone.
    const taken = lockJournal(journal)
    old.release()
    assert.equal(JSON.parse(readFileSync(`${journal}.lock`, 'utf8')).pid, process.pid)
    taken.release()
    assert.equal(existsSync(`${journal}.lock`), false)
  })
})
