/**
 * The sandbox specification of a confined stdio upstream (docs/sandbox.md, ADR 030): what the
 * config resolves an entry's `sandbox:` to, every default applied and every path absolute.
 * src/sandbox/ confines a server by it; the config builds it without knowing how.
 */
import { createHash } from 'node:crypto'
import type { ConnectGrant, Grants } from './sandbox-grants.ts'

/** Kernel limits applied to every process of a sandbox. */
export interface SandboxLimits {
  /** RLIMIT_DATA: heap and other private writable memory, per process. */
  readonly memoryBytes: number
  /** RLIMIT_NPROC: processes and threads of the sandbox's uid. */
  readonly processes: number
  /** RLIMIT_CPU: CPU seconds per process over its lifetime. */
  readonly cpuSeconds: number
  /** RLIMIT_FSIZE: largest file a process may write. */
  readonly fileBytes: number
}

/** What a confined upstream may use besides its own package; all paths are absolute. */
export interface SandboxSpec {
  /** Persists across restarts; created on launch; the server's HOME and default directory. */
  readonly stateDir: string
  /** Granted read-only. */
  readonly read: readonly string[]
  /** Granted read-write. */
  readonly write: readonly string[]
  /** Barbican's own files, masked wherever a bound path contains them. */
  readonly protect: readonly string[]
  /**
   * What the entry itself grants (grants.ts, ADR 094), inferred when the config is loaded;
   * absent: inferred from the launch. Its paths include `read` and `write` above.
   */
  readonly grants?: Grants | undefined
  readonly limits: SandboxLimits
  /** Hosts reachable through the egress proxy (ADR 040); absent or empty: no network at all. */
  readonly network?: SandboxNetwork | undefined
  /**
   * Where Barbican installs the package of a confined `npx PACKAGE@VERSION` (ADR 043); absent:
   * such a package must be installed beforehand.
   */
  readonly packageCache?: string | undefined
  /**
   * `sandbox.fallback` of the config (ADR 097): what happens when no mechanism of this host can
   * confine the server (not Node, no bubblewrap): `refuse` (absent: the default) or `unconfined`.
   */
  readonly fallback?: 'refuse' | 'unconfined' | undefined
  /**
   * Host:ports the server reaches by any TCP protocol, each through a forward of its own into
   * the sandbox's network namespace (src/sandbox/forwarders.ts); absent or empty: none.
   */
  readonly connect?: readonly ConnectGrant[] | undefined
}

/** `sandbox.network`: what the egress proxy lets through, and how much at once. */
export interface SandboxNetwork {
  readonly allow: readonly string[]
  /** Connections through the proxy at once. */
  readonly maxConnections: number
}

/** `sandbox.limits` as the config writes them. */
export interface SandboxLimitSettings {
  readonly memoryMb: number
  readonly processes: number
  readonly cpuSeconds: number
  readonly fileSizeMb: number
}

/** `sandbox.limits` when an entry sets none, in the config's units (docs/sandbox.md). */
export const DEFAULT_SANDBOX_LIMIT_SETTINGS: SandboxLimitSettings = Object.freeze({
  memoryMb: 2048,
  processes: 256,
  cpuSeconds: 24 * 3600,
  fileSizeMb: 1024,
})

/** `sandbox.limits` as the kernel takes them. */
export function sandboxLimitsOf(settings: SandboxLimitSettings): SandboxLimits {
  return {
    memoryBytes: settings.memoryMb * 1024 * 1024,
    processes: settings.processes,
    cpuSeconds: settings.cpuSeconds,
    fileBytes: settings.fileSizeMb * 1024 * 1024,
  }
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = sandboxLimitsOf(DEFAULT_SANDBOX_LIMIT_SETTINGS)

/**
 * The unprivileged uid a root gateway runs `name` as: one per upstream, so two upstreams cannot
 * signal or read each other, in a range no distribution hands out to people.
 */
export function sandboxUid(name: string): number {
  const hash = createHash('sha256').update(name).digest().readUInt32BE(0)
  return 2_100_000_000 + (hash % 1_000_000)
}

/** Whether Barbican runs as uid 0 (then the server gets `sandboxUid`). */
export function runsAsRoot(): boolean {
  return process.getuid?.() === 0
}
