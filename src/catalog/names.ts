/**
 * Namespacing: how an upstream's tool, prompt and resource names are exposed by a virtual server
 * with several upstreams, and how an exposed name leads back to its upstream.
 *
 * Tools and prompts: `server__tool` (separator configurable). Resource URIs and URI templates:
 * `server+scheme://rest`, which stays a valid URI (RFC 3986 allows `+` in a scheme) and reads
 * naturally; it is reversed by splitting at the first `+` whose prefix names an upstream.
 */

import { nameProblem } from '../protocol/item-names.ts'

export type NamespaceMode = 'always' | 'on-conflict' | 'never'

export interface Namespacing {
  readonly mode: NamespaceMode
  readonly separator: string
}

export function prefixName(upstream: string, name: string, separator: string): string {
  return `${upstream}${separator}${name}`
}

/** True when a name obeys the spec's tool-name rules (protocol/item-names.ts). */
export function isValidToolName(name: string): boolean {
  return nameProblem(name) === undefined
}

export function prefixUri(upstream: string, uri: string): string {
  return `${upstream}+${uri}`
}

/** Splits `server+scheme://…` when `server` is one of `upstreams`; otherwise `undefined`. */
export function splitUri(
  uri: string,
  upstreams: ReadonlySet<string>,
): { upstream: string; uri: string } | undefined {
  const plus = uri.indexOf('+')
  if (plus <= 0) return undefined
  const upstream = uri.slice(0, plus)
  if (!upstreams.has(upstream)) return undefined
  return { upstream, uri: uri.slice(plus + 1) }
}
