/**
 * How a stdio upstream's process is watched and how its end is read: the shell watchdog that
 * keeps an unconfined server from outliving Barbican, the exit status as bubblewrap reports it,
 * and a bounded wait for an exit.
 */
import { constants } from 'node:os'
import { type Launch, resolveCommand } from '../sandbox/sandbox.ts'

/** How the child ended: an exit code, or the signal that killed it. */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** Process groups and the watchdog are POSIX; Windows children are killed one by one. */
export const POSIX = process.platform !== 'win32'

/**
 * The watchdog of an unconfined (`sandbox: none`) upstream: a POSIX shell (about 1 MB) leading
 * the process group. It starts the server on its stdin/stdout/stderr, reports the server's pid
 * on fd 3, and a reader of fd 3 kills the whole group when that pipe ends, which the kernel
 * does however Barbican dies, SIGKILL included. A SIGTERM to the group reaches the server; the
 * shell waits for it and mirrors how it ended. Background jobs of a non-interactive shell get
 * /dev/null as stdin, hence stdin is passed through fd 4.
 */
const UNCONFINED_WATCHDOG = [
  'unset PWD OLDPWD',
  'exec 4<&0',
  '"$@" <&4 4<&- 3>&- &',
  'child=$!',
  'exec 4<&-',
  'echo "$child" >&3',
  '{ while read -r line; do :; done; kill -KILL 0; } <&3 &',
  'watcher=$!',
  'exec 3>&-',
  'trap \'kill -TERM "$child" 2>/dev/null\' TERM',
  'trap \'kill -INT "$child" 2>/dev/null\' INT',
  'trap \'kill -HUP "$child" 2>/dev/null\' HUP',
  'while :; do wait "$child"; status=$?; kill -0 "$child" 2>/dev/null || break; done',
  'kill "$watcher" 2>/dev/null',
  'if [ "$status" -gt 128 ]; then',
  '  sig=$(kill -l "$status"); trap - TERM INT HUP; kill -s "$sig" $$',
  'fi',
  'exit "$status"',
].join('\n')

/** `inner` run under the watchdog, which leads its process group (POSIX only). */
export function underWatchdog(inner: Launch): Launch {
  const resolved = resolveCommand(inner.command, inner.cwd ?? process.cwd(), inner.env.PATH)
  return {
    command: '/bin/sh',
    args: ['-c', UNCONFINED_WATCHDOG, 'barbican-upstream', resolved, ...inner.args],
    env: inner.env,
    cwd: inner.cwd,
    mechanism: inner.mechanism,
    watchdog: true,
  }
}

/** An exit code of 128 + N read as death by signal N (how bwrap reports its child's signal). */
export function signalledExit(exit: ExitStatus): ExitStatus {
  if (exit.signal !== null || exit.code === null || exit.code <= 128) return exit
  const signal = Object.entries(constants.signals).find(([, n]) => n === exit.code! - 128)?.[0]
  return signal === undefined ? exit : { code: null, signal: signal as NodeJS.Signals }
}

/** True when `promise` settles within `ms`; the timer never outlives the wait. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms)
  })
  try {
    return await Promise.race([promise.then(() => true as const), timeout])
  } finally {
    clearTimeout(timer)
  }
}
