/**
 * Barbican talking to a stdio upstream: a child process spawned with an exact argv and no shell,
 * one JSON-RPC message per line on its stdin/stdout, its stderr logged line by line.
 *
 * The child leads its own process group, so that shutdown reaches the whole tree (`npx` →
 * `node` → …), and nothing outlives Barbican however Barbican ends, SIGKILL included: a confined
 * child runs in bubblewrap with `--die-with-parent` and its own PID namespace (sandbox.ts), an
 * unconfined one under a small shell watchdog (stdio-process.ts). The environment holds only
 * what the config declares plus a short documented list (PATH, HOME, proxies, CA files, locale,
 * timezone; see `pass-through-env.ts`): an upstream never sees Barbican's secrets by accident.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { Duplex } from 'node:stream'
import { BarbicanError, upstreamClosed } from '../common/errors.ts'
import { DEFAULT_LIMITS } from '../config/defaults.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { type JsonRpcMessage, serialize } from '../protocol/jsonrpc.ts'
import { ResponseIdScanner } from '../protocol/response-id.ts'
import { describeUnconfined, launchConfined } from '../sandbox/confine.ts'
import {
  exitReport,
  NODE_PERMISSION_EXIT_NOTE,
  StderrTail,
  spawnFailure,
} from '../sandbox/exit-report.ts'
import {
  type HostSide,
  hostSideDir,
  startHostSide,
  stopHostSide,
  wantsHostSide,
} from '../sandbox/host-side.ts'
import { childEnvironment } from '../sandbox/pass-through-env.ts'
import {
  type Launch,
  type SandboxRefusalSink,
  type SandboxSpec,
  sandboxFacility,
} from '../sandbox/sandbox.ts'
import type { Logger } from '../telemetry/log.ts'
import { LineSplitter, type OverflowSink } from './line-splitter.ts'
import {
  decodePayload,
  lostReplyFault,
  oversizeReason,
  preview,
  protocolFault,
} from './outbound-payload.ts'
import {
  type ExitStatus,
  POSIX,
  settlesWithin,
  signalledExit,
  underWatchdog,
} from './stdio-process.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

export type { ExitStatus }

/** What the config says about one stdio upstream. */
export interface StdioSpec {
  readonly command: string
  readonly args?: readonly string[] | undefined
  /** The child's environment, besides the pass-through variables (`pass-through-env.ts`). */
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd?: string | undefined
  /** The confinement to run it in (src/sandbox/sandbox.ts); 'none' or absent: unconfined. */
  readonly sandbox?: SandboxSpec | 'none' | undefined
}

export interface StdioOutboundOptions extends StdioSpec {
  /** The upstream's name, bound to every log line about it. */
  readonly name: string
  readonly log: Logger
  readonly limits: JsonLimits
  /** How long to wait for an exit after closing stdin, before SIGTERM (default 2000 ms). */
  readonly closeGraceMs?: number | undefined
  /** How long to wait after SIGTERM before SIGKILL (default 2000 ms). */
  readonly termGraceMs?: number | undefined
  /** How long the command may take to spawn (default 10 s). */
  readonly startTimeoutMs?: number | undefined
  /** Bytes that may wait for the child to read them before `send` refuses (default 8 MiB). */
  readonly maxQueuedBytes?: number | undefined
  /** Longest stderr line logged whole (default 16 KiB). */
  readonly maxStderrLineBytes?: number | undefined
  /** Told when its sandbox refuses a launch or an egress attempt (audit and metrics). */
  readonly onSandboxRefusal?: SandboxRefusalSink | undefined
}

/** Counters for operators and tests. */
export interface StdioStats {
  messagesIn: number
  messagesOut: number
  /** Stdout lines that were not valid JSON-RPC (logged and skipped, never fatal). */
  invalidLines: number
  stderrLines: number
}

interface QueuedWrite {
  /** The message as one line, newline included. */
  readonly line: string
  readonly bytes: number
  readonly resolve: () => void
  readonly reject: (error: Error) => void
}

/** One stdio upstream process. Create it unstarted; `start()` spawns; `close()` shuts it down. */
export class StdioOutboundTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly name: string
  readonly stats: StdioStats = { messagesIn: 0, messagesOut: 0, invalidLines: 0, stderrLines: 0 }
  /** Settles when the process has exited, whoever caused it (never rejects). */
  readonly exited: Promise<ExitStatus>

  readonly #options: StdioOutboundOptions
  readonly #log: Logger
  #resolveExited!: (status: ExitStatus) => void
  #exitStatus: ExitStatus | undefined
  #child: ChildProcess | undefined
  #serverPid: number | undefined
  /** How the running child is confined (undefined: `sandbox: none`). */
  #mechanism: Launch['mechanism']
  #state: 'new' | 'starting' | 'open' | 'closing' | 'closed' = 'new'
  /** Set once `start()` succeeded: only an opened transport reports its close. */
  #opened = false
  #closedPromise: Promise<void>
  #resolveClosed!: () => void
  #queue: QueuedWrite[] = []
  #queuedBytes = 0
  #waitingForDrain = false
  /** A flush of the queue is scheduled for the end of this event-loop turn (see send). */
  #flushScheduled = false
  readonly #flushNow = () => {
    this.#flushScheduled = false
    this.#flush()
  }
  #decoder = new TextDecoder('utf-8', { fatal: true })
  /** The last stderr lines, quoted when the process ends on its own. */
  readonly #stderrTail = new StderrTail()
  /** Why the process went away on its own (exit code or signal, last stderr lines). */
  #closeError: BarbicanError | undefined
  /** The egress proxy and connect forwards of a confined server, and their folder. */
  #egress: { side?: HostSide; readonly dir: string } | undefined

  constructor(options: StdioOutboundOptions) {
    this.#options = options
    this.name = options.name
    this.#log = options.log.child({ upstream: options.name })
    this.exited = new Promise((resolve) => {
      this.#resolveExited = resolve
    })
    this.#closedPromise = new Promise((resolve) => {
      this.#resolveClosed = resolve
    })
  }

  /** Not a session-based transport. */
  get sessionId(): undefined {
    return undefined
  }
  /** The process group leader (bwrap or the watchdog); signalling `-pid` reaches the tree. */
  get pid(): number | undefined {
    return this.#child?.pid
  }
  /** The upstream command's own process id, once spawned (bwrap's when confined). */
  get serverPid(): number | undefined {
    return this.#serverPid
  }
  get exitStatus(): ExitStatus | undefined {
    return this.#exitStatus
  }
  get isOpen(): boolean {
    return this.#state === 'open'
  }
  /** Why the process ended on its own, once it did: what callers waiting on it are told. */
  get closeError(): BarbicanError | undefined {
    return this.#closeError
  }

  /** Spawns the command; resolves once it runs, rejects if it cannot be started. */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error('StdioOutboundTransport.start() called twice')
    this.#state = 'starting'
    const o = this.#options
    const env = childEnvironment(o.env)
    const args = [...(o.args ?? [])]
    const confined = o.sandbox !== undefined && o.sandbox !== 'none'
    let launch: Launch
    try {
      launch = this.#launchOf({ command: o.command, args, env, cwd: o.cwd })
      if (launch.mechanism === 'bubblewrap' && this.#egress) await this.#startEgress()
    } catch (err) {
      this.#state = 'closed'
      this.#stopEgress()
      this.#resolveClosed()
      if (err instanceof BarbicanError && err.code === 'ERR_LAUNCH_REFUSED') {
        if (confined) {
          o.onSandboxRefusal?.({ upstream: this.name, kind: 'launch', reason: err.message })
        }
        throw err
      }
      // The command was looked up before spawning (the sandbox binds what it finds): say why not.
      const where = {
        command: o.command,
        path: env.PATH,
        ...(o.cwd === undefined ? {} : { cwd: o.cwd }),
      }
      throw new BarbicanError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `Cannot start upstream "${this.name}" (${o.command}): ${spawnFailure('ENOENT', (err as Error).message, where)}`,
        { cause: err },
      )
    }
    const child = spawn(launch.command, [...launch.args], {
      // fd 3 is the control channel of the unconfined watchdog (see stdio-process.ts), or
      // where bwrap reads the seccomp filter.
      stdio:
        launch.watchdog || launch.seccomp
          ? ['pipe', 'pipe', 'pipe', 'pipe']
          : ['pipe', 'pipe', 'pipe'],
      detached: POSIX,
      env: { ...launch.env },
      shell: false,
      windowsHide: true,
      ...(launch.cwd === undefined ? {} : { cwd: launch.cwd }),
    })
    this.#child = child
    this.#mechanism = launch.mechanism
    if (launch.seccomp) {
      const filter = child.stdio[3] as NodeJS.WritableStream | null
      filter?.on('error', () => {})
      filter?.end(launch.seccomp)
    }
    this.#wire(child)
    try {
      this.#serverPid = await this.#awaitSpawn(child, env.PATH, launch.watchdog === true)
    } catch (err) {
      this.#state = 'closing'
      this.#signal('SIGKILL')
      await settlesWithin(this.#closedPromise, 5000)
      throw err
    }
    if (this.#state !== 'starting') {
      throw this.#closeError ?? upstreamClosed(this.name, 'exited at start')
    }
    this.#state = 'open'
    this.#opened = true
    this.#log.info('upstream process started', {
      pid: child.pid,
      serverPid: this.#serverPid,
      sandbox: this.#describeStarted(launch, confined),
    })
  }

  /** What an unexpected exit adds about the mechanism (ADR 108): only the fallback has a note. */
  #exitNote(): string | undefined {
    return this.#mechanism === 'node-permission' ? NODE_PERMISSION_EXIT_NOTE : undefined
  }

  /** The mechanism a started process runs under, for the log. */
  #describeStarted(launch: Launch, confined: boolean): string {
    // One word: `upstream sandbox` at start-up and `check --verbose` say the rest (ADR 109).
    if (launch.mechanism === 'node-permission') return 'node-permission'
    if (launch.mechanism === 'unconfined') return 'unconfined (sandbox.fallback: unconfined)'
    return confined ? 'bubblewrap' : 'none'
  }

  /**
   * The command line that runs the server: inside its sandbox (bubblewrap, which kills the whole
   * tree when Barbican dies), or unconfined under a small shell watchdog that does the same for
   * its process group. Either way no Node process stands between Barbican and the server.
   */
  #launchOf(launch: Launch): Launch {
    const o = this.#options
    let inner = launch
    if (o.sandbox !== undefined && o.sandbox !== 'none') {
      const found = sandboxFacility()
      let dir: string | undefined
      if (wantsHostSide(o.sandbox) && !('missing' in found)) {
        dir = hostSideDir()
        this.#egress = { dir }
      }
      inner = launchConfined(this.name, launch, o.sandbox, found, dir)
      // bubblewrap kills the tree itself; the Node.js permission model and no mechanism do not.
      if (inner.mechanism === 'bubblewrap') return inner
      if (inner.mechanism === 'unconfined' && 'missing' in found) {
        this.#log.warn('upstream runs unconfined', { sandbox: describeUnconfined(found.missing) })
      }
    }
    return POSIX ? underWatchdog(inner) : inner
  }

  /** Starts the egress proxy and connect forwards the sandbox's listeners reach (docs/sandbox.md). */
  async #startEgress(): Promise<void> {
    const o = this.#options
    const egress = this.#egress!
    if (o.sandbox === undefined || o.sandbox === 'none') return
    egress.side = await startHostSide(egress.dir, {
      upstream: this.name,
      spec: o.sandbox,
      log: this.#log,
      onRefusal: o.onSandboxRefusal,
    })
  }

  /** Closes the egress proxy and forwards and removes their sockets, once the server is gone. */
  #stopEgress(): void {
    const egress = this.#egress
    if (!egress) return
    this.#egress = undefined
    stopHostSide(egress.dir, egress.side)
  }

  #awaitSpawn(child: ChildProcess, path: string | undefined, watchdog: boolean) {
    const o = this.#options
    return new Promise<number>((resolve, reject) => {
      const refuse = (message: string, cause?: unknown) =>
        reject(
          new BarbicanError(
            'ERR_UPSTREAM_UNAVAILABLE',
            `Cannot start upstream "${this.name}" (${o.command}): ${message}`,
            { cause },
          ),
        )
      const timer = setTimeout(
        () => refuse('timed out waiting for the process to spawn'),
        o.startTimeoutMs ?? 10_000,
      )
      const settle = <T>(fn: (value: T) => void) => {
        return (value: T) => {
          clearTimeout(timer)
          fn(value)
        }
      }
      const ok = settle(resolve)
      const fail = settle(refuse)
      const cwd = o.cwd === undefined ? {} : { cwd: o.cwd }
      const why = (code: string | undefined, message: string) =>
        spawnFailure(code, message, { command: o.command, path, ...cwd })
      child.once('error', (err: NodeJS.ErrnoException) => fail(why(err.code, err.message)))
      child.once('exit', (code, signal) => fail(`exited at once (${signal ?? code})`))
      const control = child.stdio[3]
      if (!watchdog || !(control instanceof Duplex)) {
        // Confined (or Windows): the server's own pid is not visible from here.
        child.once('spawn', () => ok(child.pid ?? 0))
        return
      }
      // The watchdog writes the server's pid on fd 3 and then only listens for its end.
      let buffered = ''
      control.setEncoding('utf8')
      control.on('data', (chunk: string) => {
        buffered += chunk
        const newline = buffered.indexOf('\n')
        if (newline >= 0) ok(Number(buffered.slice(0, newline)))
      })
      control.on('error', () => {})
    })
  }

  #wire(child: ChildProcess): void {
    const o = this.#options
    const stdout = new LineSplitter(
      o.limits.maxMessageBytes,
      (line) => this.#onStdoutLine(line),
      () => this.#oversizeLine(),
    )
    const stderr = new LineSplitter(
      o.maxStderrLineBytes ?? 16 * 1024,
      (line) => {
        this.stats.stderrLines++
        const text = line.toString('utf8')
        this.#stderrTail.push(text)
        // Servers' start-up banners and chatter: debug. The tail is quoted when the process exits.
        this.#log.debug('upstream stderr', { line: text })
      },
      () => {
        this.#log.warn('upstream stderr line too long; skipped')
        return undefined
      },
    )
    child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk))
    child.stdout?.on('end', () => stdout.end())
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk))
    child.stderr?.on('end', () => stderr.end())
    // Write failures (EPIPE once the child is gone) reach the pending sends' callbacks.
    child.stdin?.on('error', (err) => this.#log.debug('upstream stdin error', { error: err }))
    child.on('error', (err) => this.#log.warn('upstream process error', { error: err }))
    child.once('exit', (code, signal) => this.#onExit({ code, signal }))
    child.once('close', () => this.#onClosed())
  }

  #onStdoutLine(line: Buffer): void {
    if (line.length === 0) return
    let text: string
    try {
      text = this.#decoder.decode(line)
    } catch {
      this.#invalid('not UTF-8', '')
      return
    }
    const decoded = decodePayload(text, this.#options.limits)
    for (const fault of decoded.faults) this.#invalid(fault.message, text, fault)
    const info = decoded.batch ? { batch: true, bytes: line.length } : { bytes: line.length }
    for (const message of decoded.messages) {
      this.stats.messagesIn++
      try {
        this.onmessage?.(message, info)
      } catch (err) {
        // A faulty handler must not take the pipe down with it.
        this.#log.error('message handler failed', { error: err })
      }
    }
  }

  /**
   * A stdout line beyond maxMessageBytes, skipped as it passes: when it ends, the request it
   * answered (its id found without keeping the line) fails at once, and the pipe reads on.
   */
  #oversizeLine(): OverflowSink {
    const scanner = new ResponseIdScanner()
    return {
      push: (part) => scanner.push(part),
      end: () => {
        const reason = oversizeReason(this.#options.limits.maxMessageBytes)
        this.#invalid(reason, '', lostReplyFault(reason, scanner.responseId()))
      },
    }
  }

  #invalid(reason: string, text: string, fault = protocolFault(reason)): void {
    this.stats.invalidLines++
    this.#log.warn('upstream wrote an invalid line on stdout', { reason, line: preview(text) })
    this.onerror?.(fault)
  }

  #onExit(exit: ExitStatus): void {
    // bwrap ends with 128 + N when the server died of signal N: report the signal, as unconfined.
    const status = this.#mechanism === 'bubblewrap' ? signalledExit(exit) : exit
    this.#exitStatus = status
    // Sweep what the server left behind in its group (daemonized helpers, a wrapper's child).
    if (POSIX) this.#signal('SIGKILL')
    this.#resolveExited(status)
    // Grandchildren that escaped the group may hold the pipes open: stop waiting for them.
    setTimeout(() => {
      if (this.#state === 'closed') return
      for (const stream of this.#child?.stdio ?? []) stream?.destroy()
    }, 1000).unref()
  }

  #onClosed(): void {
    const expected = this.#state === 'closing'
    this.#state = 'closed'
    const status = this.#exitStatus ?? { code: null, signal: null }
    const stderr = [...this.#stderrTail.lines]
    const error = expected
      ? upstreamClosed(this.name, 'exited')
      : upstreamClosed(this.name, exitReport(status, stderr, this.#exitNote()), {
          data: { exitCode: status.code, signal: status.signal, stderr },
        })
    if (!expected) this.#closeError = error
    this.#stopEgress()
    for (const item of this.#queue.splice(0)) item.reject(error)
    this.#queuedBytes = 0
    const fields = { code: status.code, signal: status.signal }
    if (expected) this.#log.info('upstream process stopped', fields)
    else this.#log.warn('upstream process exited', { ...fields, stderr })
    this.#resolveClosed()
    if (this.#opened) this.onclose?.()
  }

  /**
   * Writes one message as a line. Resolves once the bytes are handed to the pipe; while the
   * child does not read, writes wait for 'drain', and beyond `maxQueuedBytes` sends are refused.
   */
  send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    const stdin = this.#child?.stdin
    if (this.#state !== 'open' || !stdin) {
      return Promise.reject(this.#closeError ?? upstreamClosed(this.name, 'is not running'))
    }
    const line = `${serialize(message)}\n`
    const bytes = Buffer.byteLength(line, 'utf8')
    const limit = this.#options.maxQueuedBytes ?? DEFAULT_LIMITS.upstreamMaxQueuedBytes
    if (this.#queuedBytes + bytes > limit) {
      return Promise.reject(
        new BarbicanError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `Upstream "${this.name}" is not reading its input: ${this.#queuedBytes} bytes waiting, ` +
            `and ${bytes} more would pass limits.upstreamMaxQueuedBytes (${limit})`,
          { data: { limit: 'upstreamMaxQueuedBytes', maxQueuedBytes: limit } },
        ),
      )
    }
    this.#queuedBytes += bytes
    return new Promise((resolve, reject) => {
      this.#queue.push({ line, bytes, resolve, reject })
      // Messages sent in one event-loop turn (concurrent calls whose requests arrived together)
      // leave in one write instead of a write each; the flush runs in setImmediate, right after
      // this turn's I/O callbacks, so a lone message is not delayed by another loop turn.
      if (!this.#flushScheduled && !this.#waitingForDrain) {
        this.#flushScheduled = true
        setImmediate(this.#flushNow)
      }
    })
  }

  /** Writes everything queued as one chunk, unless the pipe is full (then at its 'drain'). */
  #flush(): void {
    const stdin = this.#child?.stdin
    if (!stdin || this.#waitingForDrain || this.#queue.length === 0) return
    const batch = this.#queue
    this.#queue = []
    const text = batch.length === 1 ? batch[0]!.line : batch.map((item) => item.line).join('')
    const ok = stdin.write(text, 'utf8', (err) => {
      for (const item of batch) {
        this.#queuedBytes -= item.bytes
        if (err) {
          item.reject(upstreamClosed(this.name, 'input closed', { cause: err }))
        } else {
          this.stats.messagesOut++
          item.resolve()
        }
      }
    })
    if (!ok) {
      this.#waitingForDrain = true
      stdin.once('drain', () => {
        this.#waitingForDrain = false
        this.#flush()
      })
    }
  }

  /**
   * Shuts the process down as the MCP lifecycle asks: close stdin, wait; SIGTERM, wait; SIGKILL.
   * Resolves when the process and its pipes are gone. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#state === 'new') {
      this.#state = 'closed'
      return
    }
    if (this.#state === 'closed' || this.#state === 'closing') return this.#closedPromise
    this.#state = 'closing'
    const o = this.#options
    // What was sent in this turn still leaves (a last notification before the close).
    this.#flush()
    const error = upstreamClosed(this.name, 'is closing')
    for (const item of this.#queue.splice(0)) {
      this.#queuedBytes -= item.bytes
      item.reject(error)
    }
    this.#child?.stdin?.end()
    if (!(await settlesWithin(this.exited, o.closeGraceMs ?? 2000))) {
      this.#log.info('upstream did not exit after stdin closed; sending SIGTERM')
      this.#signal('SIGTERM')
      if (!(await settlesWithin(this.exited, o.termGraceMs ?? 2000))) {
        this.#log.warn('upstream did not exit after SIGTERM; sending SIGKILL')
        this.#signal('SIGKILL')
      }
    }
    await this.#closedPromise
  }

  #signal(signal: NodeJS.Signals): void {
    const child = this.#child
    if (child?.pid === undefined) return
    try {
      if (POSIX) process.kill(-child.pid, signal)
      else child.kill(signal)
    } catch {
      // Already gone.
    }
  }
}
