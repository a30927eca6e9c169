/**
 * Database URLs (PostgreSQL, Redis): checked for scheme and host, and shown without their
 * password. Free of zod, so commands outside the config loader can use it.
 */

export const POSTGRES_SCHEMES = ['postgres', 'postgresql'] as const
export const REDIS_SCHEMES = ['redis', 'rediss'] as const

/** Why `url` is not a usable URL of one of `schemes`, or undefined when it is. */
export function urlProblem(url: string, schemes: readonly string[]): string | undefined {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return `is not a URL (expected ${schemes[0]}://HOST[:PORT]/…)`
  }
  const scheme = parsed.protocol.replace(/:$/, '')
  if (!schemes.includes(scheme)) {
    return `has the scheme "${scheme}:"; expected ${schemes.map((s) => `${s}:`).join(' or ')}`
  }
  if (parsed.hostname === '') return 'names no host'
  return undefined
}

/** A URL without its password, for messages and logs (database URLs carry credentials). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password !== '') u.password = '***'
    return u.toString()
  } catch {
    return '(unparsable URL)'
  }
}
