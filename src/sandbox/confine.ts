/**
 * Which mechanism confines an upstream on this host, and what runs when none can (ADR 097):
 * bubblewrap where the host has it; else the Node.js permission model for a Node program; else
 * the server is refused, naming the entry's `sandbox: none` and the gateway-wide
 * `sandbox.fallback: unconfined`, with which the operator accepts running every such server
 * unconfined. Never silently less: an unconfined server is said so in the log, `barbican
 * check`, `/readyz` and the console.
 */
import { BarbicanError } from '../common/errors.ts'
import { NODE_MECHANISM, NODE_NOT_COVERED, nodePermissionLaunch } from './node-permission.ts'
import {
  confinedLaunch,
  describeBubblewrap,
  type Launch,
  refuseOwnFiles,
  runsAsRoot,
  runsOnNode,
  type SandboxFacility,
  type SandboxSpec,
  sandboxFacility,
} from './sandbox.ts'

/** What an entry gets on this host. */
export type Confinement = 'bubblewrap' | 'node-permission' | 'unconfined' | 'refused' | 'none'

type Found = SandboxFacility | { missing: string }

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
 * How an upstream is confined, in one line for the startup log, `barbican check` and the
 * console: the mechanism and what it leaves open, the explicit opt-out, the accepted fallback,
 * or the refusal.
 */
export function describeConfinement(
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
