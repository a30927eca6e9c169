/**
 * Why an inbound request is not authenticated: the OAuth error it maps to (RFC 6750 §3.1) and a
 * description safe to show the caller. Kept apart from BarbicanError because these end at the
 * HTTP layer (401/403 with WWW-Authenticate) and never become JSON-RPC errors.
 */
import type { ChallengeError } from './resource-metadata.ts'

export class AuthFailure extends Error {
  override readonly name = 'AuthFailure'
  /** `undefined` when the request carried no credentials at all. */
  readonly error: ChallengeError | undefined

  constructor(
    error: ChallengeError | undefined,
    description: string,
    options?: { cause?: unknown },
  ) {
    super(description, options?.cause === undefined ? undefined : { cause: options.cause })
    this.error = error
  }

  /** 403 for insufficient scope (step-up), 400 for malformed requests, 401 otherwise. */
  get status(): 401 | 403 | 400 {
    if (this.error === 'insufficient_scope') return 403
    if (this.error === 'invalid_request') return 400
    return 401
  }
}
