/**
 * The host side of a bubblewrap sandbox's network (docs/sandbox.md): a private folder holding the
 * unix sockets bound into the sandbox, the egress proxy on `proxy.sock` when the entry lists
 * `sandbox.network.allow` (ADR 040), and one connect forward per connect grant on
 * `connect-N.sock` (src/sandbox/connect-forward.ts). The socket names come from the same plan
 * confinedLaunch binds (forwarders.ts's planConnects), so both sides agree.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Logger } from '../telemetry/log.ts'
import { startConnectForward } from './connect-forward.ts'
import { startEgressProxy } from './egress-proxy.ts'
import { planConnects } from './forwarders.ts'
import type { SandboxRefusalSink, SandboxSpec } from './sandbox.ts'

/** Whether a bubblewrap sandbox needs host-side sockets (egress proxy or connect forwards). */
export function wantsHostSide(spec: SandboxSpec): boolean {
  return (spec.network?.allow.length ?? 0) > 0 || planConnects(spec.connect).forwards.length > 0
}

/** A private folder for the sockets: a unix socket path is short (108 bytes), so the system temp. */
export function hostSideDir(): string {
  return mkdtempSync(join(tmpdir(), 'barbican-egress-'))
}

export interface HostSide {
  close(): Promise<void>
}

/** Starts what listens in `dir` for `spec`; on failure closes what started and rethrows. */
export async function startHostSide(
  dir: string,
  options: {
    readonly upstream: string
    readonly spec: SandboxSpec
    readonly log: Logger
    readonly onRefusal?: SandboxRefusalSink | undefined
  },
): Promise<HostSide> {
  const { upstream, spec, log } = options
  const closers: Array<() => Promise<void>> = []
  const close = async () => {
    await Promise.allSettled(closers.map((c) => c()))
  }
  try {
    if ((spec.network?.allow.length ?? 0) > 0) {
      const proxy = await startEgressProxy(join(dir, 'proxy.sock'), {
        upstream,
        allow: spec.network?.allow ?? [],
        maxConnections: spec.network?.maxConnections,
        log: log.child({ part: 'egress' }),
        onRefused: (attempt) =>
          options.onRefusal?.({
            upstream,
            kind: 'egress',
            target: `${attempt.host}:${attempt.port}`,
            reason: attempt.reason ?? 'refused',
          }),
      })
      closers.push(() => proxy.close())
    }
    const plan = planConnects(spec.connect)
    for (const { grant, reason } of plan.unreachable) {
      log.warn('connect grant not forwarded', { upstream, ...grant, reason })
    }
    for (const forward of plan.forwards) {
      const started = await startConnectForward(join(dir, forward.socket), {
        upstream,
        grant: forward.grant,
        log: log.child({ part: 'connect' }),
        maxConnections: spec.network?.maxConnections,
      })
      closers.push(() => started.close())
    }
  } catch (err) {
    await close()
    throw err
  }
  return { close }
}

/** Closes `side` (if it started) and removes its folder. */
export function stopHostSide(dir: string, side: HostSide | undefined): void {
  const remove = () => rmSync(dir, { recursive: true, force: true })
  if (side) void side.close().finally(remove)
  else remove()
}
