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
  /**
   * The token could not be checked at all (the issuer's keys or introspection endpoint are
   * unreachable): a 503, so clients retry instead of discarding a token that may be good.
   */
  readonly unavailable: boolean

  constructor(
    error: ChallengeError | undefined,
    description: string,
    options?: { cause?: unknown; unavailable?: boolean },
  ) {
    super(description, options?.cause === undefined ? undefined : { cause: options.cause })
    this.error = error
    this.unavailable = options?.unavailable ?? false
  }

  /** 503 when unverifiable, 403 for missing scopes (step-up), 400 when malformed, else 401. */
  get status(): 400 | 401 | 403 | 503 {
    if (this.unavailable) return 503
    if (this.error === 'insufficient_scope') return 403
    if (this.error === 'invalid_request') return 400
    return 401
  }
}
