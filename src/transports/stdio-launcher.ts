/**
 * The watchdog between Barbican and one stdio upstream. Barbican runs this script with its own
 * Node binary as the leader of a new process group; it reads the launch spec from fd 3, spawns
 * the real command (exact argv, no shell) on the same stdin/stdout/stderr, and mirrors its exit.
 *
 * Why it exists: a child's stdin EOF does not reliably stop an upstream (`npx` and other
 * wrappers may not forward it), and a SIGKILLed Barbican runs no cleanup code at all. The kernel
 * closes Barbican's end of fd 3 however Barbican dies, so this script notices and takes the whole
 * group down: SIGTERM, a grace period, then SIGKILL. It imports nothing from Barbican so that it
 * starts fast and runs unchanged from `src/` (type stripping) or a build.
 *
 * Protocol on fd 3 (newline-delimited JSON): Barbican → launcher, one line
 * `{"command","args","env","cwd"?,"killGraceMs"}`; launcher → Barbican, one line
 * `{"spawned":pid}` or `{"error":{"code","message"}}`.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { Socket } from 'node:net'

interface LaunchSpec {
  command: string
  args: string[]
  env: Record<string, string>
  cwd?: string
  killGraceMs: number
}

const control = new Socket({ fd: 3, readable: true, writable: true })
let received = ''
let child: ChildProcess | undefined
let killGraceMs = 2000
let parentGone = false

// The group's SIGTERM is meant for the server: the launcher outlives it to mirror its exit.
// SIGINT and SIGHUP cannot come from a terminal (the group has its own session) but are
// ignored for the same reason.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => {})

control.setEncoding('utf8')
control.on('data', (chunk: string) => {
  if (child !== undefined) return
  received += chunk
  const newline = received.indexOf('\n')
  if (newline >= 0) launch(JSON.parse(received.slice(0, newline)) as LaunchSpec)
})
control.on('end', parentLost)
control.on('close', parentLost)
control.on('error', parentLost)

function launch(spec: LaunchSpec): void {
  killGraceMs = spec.killGraceMs
  try {
    child = spawn(spec.command, spec.args, {
      env: spec.env,
      stdio: 'inherit',
      shell: false,
      windowsHide: true,
      ...(spec.cwd === undefined ? {} : { cwd: spec.cwd }),
    })
  } catch (err) {
    fail(err as NodeJS.ErrnoException)
    return
  }
  const started = child
  started.on('spawn', () => report({ spawned: started.pid }))
  started.on('error', (err: NodeJS.ErrnoException) => {
    if (started.pid === undefined) fail(err)
  })
  started.on('exit', (code, signal) => mirror(code, signal))
}

function report(value: unknown): void {
  if (!parentGone) control.write(`${JSON.stringify(value)}\n`)
}

function fail(err: NodeJS.ErrnoException): void {
  report({ error: { code: err.code ?? 'ERR_SPAWN', message: err.message } })
  // Let the report reach Barbican before exiting with a shell's "command not found" status.
  control.end(() => process.exit(127))
  setTimeout(() => process.exit(127), 1000)
}

function parentLost(): void {
  if (parentGone) return
  parentGone = true
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
    killGroup('SIGKILL')
    process.exit(1)
  }
  killGroup('SIGTERM')
  setTimeout(() => killGroup('SIGKILL'), killGraceMs)
}

function mirror(code: number | null, signal: NodeJS.Signals | null): void {
  // With Barbican gone nobody else can sweep what the server left behind in the group.
  if (parentGone) killGroup('SIGKILL')
  if (signal !== null) {
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
    // Signals whose default action is to ignore (SIGCHLD, SIGWINCH…) do not end the process.
    setTimeout(() => process.exit(1), 100)
    return
  }
  process.exit(code ?? 1)
}

function killGroup(signal: NodeJS.Signals): void {
  try {
    process.kill(-process.pid, signal)
  } catch {
    // The group is already empty.
  }
}
