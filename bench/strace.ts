/**
 * Counting a running process's system calls by kind: `strace -f -c -p PID` is attached for the
 * span of `during()` only (every thread, and children forked meanwhile), then interrupted; its
 * summary table is parsed. strace slows every syscall many times over, so use the counts, never
 * the timings of a traced run.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Calls per syscall name. */
export type SyscallCounts = Record<string, number>

/** Parses `strace -c` output: the rows between the dashed rule and the `total` line. */
export function parseStraceSummary(text: string): SyscallCounts {
  const counts: SyscallCounts = {}
  for (const line of text.split('\n')) {
    // % time  seconds  usecs/call  calls  [errors]  syscall
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/.exec(line)
    if (m && m[2] !== 'total') counts[m[2]!] = Number(m[1])
  }
  return counts
}

/** Counts the syscalls of `pid` (all its threads) while `during()` runs. */
export async function countSyscalls(
  pid: number,
  during: () => Promise<void>,
): Promise<SyscallCounts> {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-strace-'))
  const out = join(dir, 'summary.txt')
  const strace = spawn('strace', ['-f', '-c', '-o', out, '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  try {
    // strace reports each thread it attaches to; the call is traced once the first one is.
    await new Promise<void>((resolve, reject) => {
      let err = ''
      strace.stderr.on('data', (chunk: Buffer) => {
        err += chunk.toString('utf8')
        if (err.includes('attached')) resolve()
      })
      strace.once('exit', (code) => reject(new Error(`strace exited (${code}): ${err}`)))
    })
    await new Promise((resolve) => setTimeout(resolve, 200))
    await during()
  } finally {
    const exited = new Promise((resolve) => strace.once('exit', resolve))
    strace.kill('SIGINT')
    await exited
  }
  try {
    return parseStraceSummary(readFileSync(out, 'utf8'))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Sum of all counts. */
export const totalCalls = (c: SyscallCounts) => Object.values(c).reduce((a, b) => a + b, 0)
