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

  /**
   * 503 when unverifiable, 403 for missing scopes (step-up), else 401. A malformed header
   * (`invalid_request`) is 401 too, not RFC 6750's 400: MCP clients start OAuth discovery only
   * on a 401 with a challenge (docs/decisions/019).
   */
  get status(): 401 | 403 | 503 {
    if (this.unavailable) return 503
    if (this.error === 'insufficient_scope') return 403
    return 401
  }
}
