/**
 * CPU affinity for the pinned mode of bench/fleet.ts (`--pin`): processes are pinned with
 * `taskset -a -p` (every thread) and given back their previous mask afterwards; per-CPU busy time
 * comes from /proc/stat, so a run can say which core was the bottleneck.
 */
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

/** The affinity mask of `pid` as taskset prints it (hex), or undefined if it is gone. */
function maskOf(pid: number): string | undefined {
  const r = spawnSync('taskset', ['-p', String(pid)], { encoding: 'utf8' })
  return /mask:\s*([0-9a-f]+)/.exec(r.stdout)?.[1]
}

/**
 * Pins every thread of each process to `cpu`; returns a function that restores each one's
 * previous mask (processes gone meanwhile are skipped).
 */
export function pin(pids: readonly number[], cpu: number): () => void {
  const before = pids.map((pid) => [pid, maskOf(pid)] as const)
  for (const [pid, mask] of before) {
    if (mask === undefined) continue
    const r = spawnSync('taskset', ['-a', '-p', (1 << cpu).toString(16), String(pid)], {
      encoding: 'utf8',
    })
    if (r.status !== 0) throw new Error(`taskset ${pid}: ${r.stderr}`)
  }
  return () => {
    for (const [pid, mask] of before) {
      if (mask !== undefined) spawnSync('taskset', ['-a', '-p', mask, String(pid)])
    }
  }
}

/** The direct children of `pid` (every thread's). */
export function childrenOf(pid: number): number[] {
  const out: number[] = []
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim()
      if (text !== '') out.push(...text.split(/\s+/).map(Number))
    }
  } catch {}
  return out
}

/**
 * Every descendant of `pid`, depth first. A gateway's stdio upstream runs under bubblewrap
 * (`bwrap`, a new PID namespace), so the upstream itself is a grandchild or further down.
 */
export function descendantsOf(pid: number): number[] {
  return childrenOf(pid).flatMap((child) => [child, ...descendantsOf(child)])
}

/** The PIDs of processes whose command name is exactly `name` (pgrep -x). */
export function pidsNamed(name: string): number[] {
  const r = spawnSync('pgrep', ['-x', name], { encoding: 'utf8' })
  return r.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map(Number)
}

/** Per CPU: jiffies busy (everything but idle and iowait) and in total, since boot. */
export function cpuTimes(): { busy: number; total: number }[] {
  const out: { busy: number; total: number }[] = []
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const m = /^cpu(\d+)\s+(.*)$/.exec(line)
    if (!m) continue
    const f = m[2]!.trim().split(/\s+/).map(Number)
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0)
    out[Number(m[1])] = { busy: total - f[3]! - f[4]!, total }
  }
  return out
}

/** Busy fraction of each CPU between two cpuTimes() readings. */
export function busyBetween(
  a: readonly { busy: number; total: number }[],
  b: readonly { busy: number; total: number }[],
): number[] {
  return b.map((x, i) => (x.busy - a[i]!.busy) / Math.max(1, x.total - a[i]!.total))
}
