/**
 * Binding an account link to the browser that started it (RFC 6749 §10.12, RFC 9700 §4.7, MCP
 * security best practices). Without it, anyone could start a link for their own Barbican user,
 * send the authorization URL to a victim, and the victim's consent would store the victim's
 * upstream tokens under the attacker's user.
 *
 * The link page sets a cookie holding a random nonce; only its hash is kept with the pending
 * state, and the callback accepts the state only from a browser presenting that nonce. The
 * cookie is HttpOnly (no script reads it), SameSite=Lax (sent on the top-level redirect back from
 * the issuer, which is cross-site, and on nothing cross-site else), Secure when Barbican is
 * reached over https, scoped to the callback path, and named after the state, so one browser can
 * run several links at once.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

/** How long the cookie lives: as long as the pending state it belongs to. */
export const BROWSER_BINDING_TTL_S = 10 * 60

const COOKIE_PREFIX = 'barbican-link-'

/** Where the cookie is sent: only to the callback path, and only over https when Barbican is. */
export interface CookieScope {
  readonly path: string
  readonly secure: boolean
}

export interface BrowserBinding {
  /** The `Set-Cookie` value for the link page's response. */
  readonly setCookie: string
  /** What the pending state keeps: the nonce's SHA-256, never the nonce. */
  readonly hash: Buffer
}

/** A fresh nonce for the link of `state`, as a cookie and the hash to keep. */
export function bindBrowser(state: string, scope: CookieScope): BrowserBinding {
  const nonce = randomBytes(32).toString('base64url')
  return {
    setCookie: cookie(state, nonce, BROWSER_BINDING_TTL_S, scope),
    hash: sha256(nonce),
  }
}

/** Whether the request's `Cookie` header carries the nonce whose hash is `expected`. */
export function isSameBrowser(
  cookieHeader: string | undefined,
  state: string,
  expected: Buffer,
): boolean {
  const name = `${COOKIE_PREFIX}${state}`
  for (const part of (cookieHeader ?? '').split(';')) {
    const eq = part.indexOf('=')
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue
    const presented = sha256(part.slice(eq + 1).trim())
    if (timingSafeEqual(presented, expected)) return true
  }
  return false
}

/** The `Set-Cookie` value that removes the cookie of `state` once the callback has used it. */
export function clearBrowserBinding(state: string, scope: CookieScope): string {
  return cookie(state, '', 0, scope)
}

function cookie(state: string, value: string, maxAge: number, scope: CookieScope): string {
  return (
    `${COOKIE_PREFIX}${state}=${value}; Path=${scope.path}; Max-Age=${maxAge}; HttpOnly; ` +
    `SameSite=Lax${scope.secure ? '; Secure' : ''}`
  )
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}
