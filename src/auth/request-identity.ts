/**
 * The identity the HTTP listener established for a request, kept beside the request object so
 * the transport endpoints can put it in ConnectionInfo without changing their signatures.
 */
import type { IncomingMessage } from 'node:http'
import type { Identity } from './identity.ts'

/**
 * A property keyed by a symbol no other module can name, rather than a WeakMap: every request
 * would otherwise add a short-lived WeakMap entry, which the garbage collector must process
 * separately (ephemerons); the property goes away with the request object.
 */
const IDENTITY = Symbol('barbican.identity')

type WithIdentity = IncomingMessage & { [IDENTITY]?: Identity }

export function setRequestIdentity(req: IncomingMessage, identity: Identity): void {
  ;(req as WithIdentity)[IDENTITY] = identity
}

/** The verified identity of `req`; undefined when the gateway runs without inbound auth. */
export function requestIdentity(req: IncomingMessage): Identity | undefined {
  return (req as WithIdentity)[IDENTITY]
}

const TOKENS = new WeakMap<Identity, string>()

/**
 * Remembers the inbound access token an identity was verified from, for RFC 8693 token exchange
 * at the identity provider only (src/credentials/token-sources.ts); it is never sent upstream.
 */
export function rememberSubjectToken(identity: Identity, token: string): void {
  TOKENS.set(identity, token)
}

/** The inbound access token behind `identity`, when it came from one. */
export function subjectToken(identity: Identity): string | undefined {
  return TOKENS.get(identity)
}

/**
 * The key a legacy session is bound to: the same caller may present a refreshed token within one
 * session, but a different caller may not use the session's id.
 */
export function identityKey(identity: Identity): string {
  let key = KEYS.get(identity)
  if (key !== undefined) return key
  key = JSON.stringify([
    identity.method === 'api-key' ? 'key' : 'user',
    identity.tenant ?? '',
    identity.subject,
  ])
  // Only identities that cannot change and are reused (an API key's) are remembered.
  if (Object.isFrozen(identity)) KEYS.set(identity, key)
  return key
}

const KEYS = new WeakMap<Identity, string>()
