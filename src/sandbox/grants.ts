/**
 * Grants in words, for `barbican check`, the start-up log and refusals: `write /srv/data (env
 * MEMORY_FILE_PATH)`, `connect 127.0.0.1:5432 (arg 1)`. What is granted is inferred when the
 * config is read (src/config/sandbox-grants.ts, ADR 094).
 */
import type { ConnectGrant, Grants, PathGrant } from '../config/sandbox-grants.ts'

/**
 * Why the entry must not start: the first path it names that is one of Barbican's own files,
 * as a message naming it. Undefined when none.
 */
export function grantRefusal(name: string, grants: Grants): string | undefined {
  const own = grants.refused.find((r) => r.fatal)
  if (own === undefined) return undefined
  return (
    `upstream "${name}" names ${own.path} (${own.source}), and ${own.reason}; ` +
    "a sandboxed server is never granted Barbican's config, store, keys, lockfile or " +
    '.barbican folder. Point the entry at another path.'
  )
}

/** One grant in words: `write /srv/data (env MEMORY_FILE_PATH)`, `connect host:5432 (arg 1)`. */
export function describeGrant(grant: PathGrant | ConnectGrant): string {
  if ('host' in grant) {
    const host = grant.host.includes(':') ? `[${grant.host}]` : grant.host
    return `connect ${host}:${grant.port} (${grant.source})`
  }
  return `${grant.access} ${grant.path} (${grant.source}${grant.tmp ? ", the host's /tmp" : ''})`
}

/** Every grant in words, prefixes and paths first, then hosts. */
export function describeGrants(grants: Grants): string[] {
  return [
    ...grants.prefixes.map(describeGrant),
    ...grants.paths.map(describeGrant),
    ...grants.connect.map(describeGrant),
  ]
}

/** Every path named but not granted, in words: `/root (arg 2): a home directory, …`. */
export function describeRefused(grants: Grants): string[] {
  return grants.refused.map((r) => `${r.path} (${r.source}): ${r.reason}`)
}

/** The lines `barbican check` and the start-up log print: `grant: …` and `not granted: …`. */
export function grantLines(sandbox: { readonly grants?: Grants | undefined } | 'none'): string[] {
  if (sandbox === 'none' || sandbox.grants === undefined) return []
  return [
    ...describeGrants(sandbox.grants).map((g) => `grant: ${g}`),
    ...describeRefused(sandbox.grants).map((r) => `not granted: ${r}`),
  ]
}
