/**
 * Which mechanism confines an upstream on this host, and what runs when none can (ADR 097):
 * bubblewrap where the host has it; else the Node.js permission model for a Node program; else
 * the server is refused, naming the entry's `sandbox: none` and the gateway-wide
 * `sandbox.fallback: unconfined`, with which the operator accepts running every such server
 * unconfined. Never silently less: an unconfined server is said so in the log, `barbican
 * check`, `/readyz` and the console.
 */
import { BarbicanError } from '../common/errors.ts'
import {
  EXISTENCE_PROBES,
  NODE_MECHANISM,
  NODE_NOT_COVERED,
  nodePermissionLaunch,
} from './node-permission.ts'
import {
  confinedLaunch,
  describeBubblewrap,
  type Launch,
  type MissingFacility,
  refuseOwnFiles,
  runsAsRoot,
  runsOnNode,
  type SandboxFacility,
  type SandboxSpec,
  SYSTEM_DIRS,
  sandboxFacility,
} from './sandbox.ts'

/** What an entry gets on this host. */
export type Confinement = 'bubblewrap' | 'node-permission' | 'unconfined' | 'refused' | 'none'

type Found = SandboxFacility | MissingFacility

/**
 * What `command` would run under on this host (`command`: the entry's command; a plain `npx`
 * counts as Node, since a confined launch rewrites it to Barbican's Node).
 */
export function confinementOf(
  sandbox: Pick<SandboxSpec, 'fallback'> | 'none' | undefined,
  command: string | undefined,
  found: Found = sandboxFacility(),
): Confinement {
  if (sandbox === undefined || sandbox === 'none') return 'none'
  if (!('missing' in found)) return 'bubblewrap'
  // A mechanism setting Barbican cannot read confines nothing, and nothing falls back from it.
  if (found.invalid) return 'refused'
  if (command !== undefined && runsOnNode(command)) return 'node-permission'
  return sandbox.fallback === 'unconfined' ? 'unconfined' : 'refused'
}

/** What `barbican import` says an imported entry gets on this host, in a few words. */
export function confinementSummary(kind: Confinement, found: Found = sandboxFacility()): string {
  const lacks = 'missing' in found ? found.missing : ''
  switch (kind) {
    case 'bubblewrap':
      return 'confined by bubblewrap'
    case 'node-permission':
      return `confined by the Node.js permission model (this host lacks ${lacks})`
    case 'unconfined':
      return `unconfined, accepted by sandbox.fallback (this host lacks ${lacks})`
    case 'refused':
      if ('missing' in found && found.invalid) return `refused: ${found.missing}`
      return (
        `refused: this host lacks ${lacks} and it is not a Node program; add \`sandbox: none\` ` +
        'to the entry or `sandbox: { fallback: unconfined }` to run it unconfined'
      )
    case 'none':
      return 'unconfined (sandbox: none)'
  }
}

/** The line that names how to run a server no mechanism of this host can confine. */
export function fallbackAdvice(name: string): string {
  return (
    `To run it unconfined anyway, add \`sandbox: none\` to this entry (upstreams.${name}), or ` +
    'accept that for every such entry at once with `sandbox: { fallback: unconfined }` at the ' +
    'top level of the config. Or install bubblewrap (Linux).'
  )
}

/** The refusal of a server that no mechanism on this host can confine. */
export function unconfinableError(name: string, missing: string): BarbicanError {
  return new BarbicanError(
    'ERR_LAUNCH_REFUSED',
    `upstream "${name}" runs confined by default, but this host lacks ${missing}, and it is ` +
      'not a Node program the Node.js permission model could confine; Barbican does not run ' +
      `it with less on its own. ${fallbackAdvice(name)}`,
  )
}

/**
 * The command line that runs `launch` confined by `spec` on this host: bubblewrap's, the
 * Node.js permission model's, or, for a server neither can confine, ERR_LAUNCH_REFUSED, unless
 * `spec.fallback` is `unconfined` (then `launch` as given, marked `unconfined`).
 */
export function launchConfined(
  name: string,
  launch: Launch,
  spec: SandboxSpec,
  found: Found = sandboxFacility(),
  runDir?: string,
): Launch {
  // An entry that names Barbican's own files runs under no mechanism (ADR 094).
  refuseOwnFiles(name, launch, spec)
  if (!('missing' in found)) return confinedLaunch(name, launch, spec, found, runDir)
  if (found.invalid) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `upstream "${name}" not started: ${found.missing}`,
    )
  }
  const node = nodePermissionLaunch(name, launch, spec)
  if (node !== undefined) return node
  if (spec.fallback !== 'unconfined') throw unconfinableError(name, found.missing)
  return { ...launch, mechanism: 'unconfined' }
}

/** The log's and check's line for an upstream run unconfined by `sandbox.fallback`. */
export function describeUnconfined(missing: string): string {
  return (
    `unconfined (sandbox.fallback: unconfined; this host lacks ${missing} and it is not a Node ` +
    "program): it runs with Barbican's own rights"
  )
}

/**
 * How an upstream is confined, in a few words for the start-up log, `barbican check` and the
 * console (ADR 109): the mechanism, its network, where it may write, and how many paths its
 * entry names that were not granted: `bubblewrap (no network; writes: state, /srv/data)`.
 * `describeConfinementInFull` is the long form of `barbican check --verbose`.
 */
export function describeConfinement(
  // The same parameters as the long form, so that callers can choose either.
  _name: string,
  sandbox: SandboxSpec | 'none' | undefined,
  command?: string,
  found: Found = sandboxFacility(),
): string {
  const kind = confinementOf(sandbox, command, found)
  if (kind === 'none' || sandbox === undefined || sandbox === 'none') return 'none (sandbox: none)'
  if (kind === 'unconfined') return 'unconfined (sandbox.fallback: unconfined)'
  if (kind === 'refused') return confinementSummary(kind, found)
  const network =
    kind === 'node-permission'
      ? 'network not confined'
      : reachable(sandbox).length === 0
        ? 'no network'
        : `network: ${reachable(sandbox).join(', ')}`
  const paths = sandbox.grants?.paths ?? [
    ...sandbox.read.map((path) => ({ path, access: 'read' as const })),
    ...sandbox.write.map((path) => ({ path, access: 'write' as const })),
  ]
  const writes = ['state', ...paths.filter((p) => p.access === 'write').map((p) => p.path)]
  const reads = paths.filter((p) => p.access === 'read').map((p) => p.path)
  const refused = sandbox.grants?.refused.length ?? 0
  // The permission model switches no uid: a root gateway's server is root (long form: why).
  const root = kind === 'node-permission' && runsAsRoot() ? '; runs as root' : ''
  return (
    `${kind} (${network}; writes: ${writes.join(', ')}` +
    (reads.length > 0 ? `; reads: ${reads.join(', ')}` : '') +
    (refused > 0 ? `; ${refused} path(s) not granted, see check --verbose` : '') +
    `${root})`
  )
}

/** The hosts a bubblewrap sandbox reaches: through the egress proxy, then by TCP forward. */
function reachable(sandbox: SandboxSpec): string[] {
  const host = (h: string) => (h.includes(':') ? `[${h}]` : h)
  return [
    ...(sandbox.network?.allow ?? []),
    ...(sandbox.connect ?? []).map((c) => `${host(c.host)}:${c.port}`),
  ]
}

/**
 * How an upstream is confined, in full, for `barbican check --verbose`: the mechanism and what
 * it leaves open, the uid, the network, the state directory, the explicit opt-out, the accepted
 * fallback, or the refusal with its fix. The grants themselves are `grantLines` (grants.ts).
 */
export function describeConfinementInFull(
  name: string,
  sandbox: SandboxSpec | 'none' | undefined,
  command?: string,
  found: Found = sandboxFacility(),
): string {
  const kind = confinementOf(sandbox, command, found)
  if (kind === 'none' || sandbox === undefined || sandbox === 'none') {
    return "none (sandbox: none; runs with Barbican's own rights)"
  }
  if (!('missing' in found)) return describeBubblewrap(name, sandbox)
  if (found.invalid) return `refused: ${found.missing}`
  if (kind === 'node-permission') {
    // No uid switch here: a root gateway's server keeps root's right to signal any process.
    const root = runsAsRoot() ? '; it runs as root, as Barbican does' : ''
    return `${NODE_MECHANISM}, state ${sandbox.stateDir}; not covered: ${NODE_NOT_COVERED}${root}`
  }
  if (kind === 'unconfined') return describeUnconfined(found.missing)
  return (
    `refused: this host lacks ${found.missing}, and only Node programs can fall back to the ` +
    `Node.js permission model. ${fallbackAdvice(name)}`
  )
}

/**
 * The grants every confined server gets from its mechanism, not from its entry, with their
 * source, for `barbican check --verbose` (ADR 145): the entry's own are `grantLines` (grants.ts).
 * Together they are everything the server may reach; empty when it is not confined.
 */
export function mechanismGrantLines(
  sandbox: SandboxSpec | 'none' | undefined,
  command?: string,
  found: Found = sandboxFacility(),
): string[] {
  const kind = confinementOf(sandbox, command, found)
  if (sandbox === undefined || sandbox === 'none') return []
  if (kind !== 'bubblewrap' && kind !== 'node-permission') return []
  const state = sandbox.stateDir
  const lines = [
    `grant: read ${SYSTEM_DIRS.join(', ')} (${kind}: the system's parts, read-only)`,
    `grant: write ${state} (${kind}: its state directory, its HOME)`,
  ]
  if (kind === 'bubblewrap') {
    lines.push(
      'grant: read its command and its package (bubblewrap: for a file under node_modules, that node_modules)',
      `grant: write its package's own folder (bubblewrap: a copy kept in ${state}/.barbican-packages, mounted over the install, ADR 095)`,
      'grant: write /tmp (bubblewrap: private to the sandbox, empty at each start)',
    )
  } else {
    lines.push(
      'grant: read its command and its package (node-permission)',
      `grant: write its package, run from a copy in ${state}/.package (node-permission, ADR 097)`,
      `grant: write ${state}/.tmp (node-permission: its TMPDIR, emptied at each start)`,
      ...EXISTENCE_PROBES.map(
        (probe) =>
          `grant: read ${probe} (node-permission: an existence probe of popular packages, this path alone, ADR 108)`,
      ),
    )
  }
  return lines
}
