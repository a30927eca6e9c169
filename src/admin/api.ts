/**
 * The admin API (docs/admin.md): `GET /admin/api/status`, the overview `barbican status`
 * prints, and `POST /admin/api/reload`, a hot reload of the config file. Open on a loopback
 * bind with no inbound auth; otherwise only an identity with the admin permission (scope
 * `barbican:admin`, or an API key that carries it) gets in. A non-loopback gateway without
 * inbound auth has no admin API at all: it fails closed. `GET /admin/api/audit` and
 * `GET /admin/api/pins` read the audit log and the pins; an admin identity with a tenant is a
 * tenant admin and sees only its tenant through every route (docs/tenants.md).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import {
  ADMIN_SCOPE,
  type AdminCaller,
  isAdmin,
  type PinDecision,
  tenantOfCaller,
} from '../auth/admin.ts'

export type { AdminCaller, PinDecision }
export { tenantOfCaller }

import type { InboundAuthenticator } from '../auth/authenticator.ts'
import { readTextBody, sendRpcError } from '../transports/http-io.ts'

export interface AdminAccess {
  /** The listener is bound to a loopback address. */
  readonly loopback: boolean
  /** Inbound authentication, when configured. */
  readonly authenticator: InboundAuthenticator | undefined
}

export interface AdminHandlers {
  /**
   * The overview: upstreams, virtual servers, sessions, the last reload. A tenant admin (an
   * admin identity with a tenant, docs/tenants.md) sees its tenant's only.
   */
  status(caller: AdminCaller): Promise<unknown>
  /** Audit records, newest first, of the caller's tenant for a tenant admin. */
  audit?(caller: AdminCaller, query: URLSearchParams): Promise<unknown>
  /** Pins and pending changes, of the caller's tenant for a tenant admin. */
  pins?(caller: AdminCaller, query: URLSearchParams): Promise<unknown>
  /**
   * Decides a pending pin change of the caller's tenant (a tenant admin names its own upstream
   * names); false when there is no such change, which is also the answer for another tenant's.
   */
  decidePin?(caller: AdminCaller, decision: PinDecision, target: PinTarget): Promise<boolean>
  /** Reloads the config file; `ok: false` in the answer when the new one was refused. */
  reload(caller: AdminCaller): Promise<{ readonly ok: boolean }>
}

/** What `POST /admin/api/pins/approve|reject` names: an upstream and a pin key. */
export interface PinTarget {
  readonly upstream: string
  readonly key: string
}

/** Largest body `POST /admin/api/pins/approve|reject` reads: `{upstream, key}` fits easily. */
const PIN_DECISION_MAX_BYTES = 4096

export const ADMIN_STATUS_PATH = '/admin/api/status'
export const ADMIN_RELOAD_PATH = '/admin/api/reload'
export const ADMIN_AUDIT_PATH = '/admin/api/audit'
export const ADMIN_PINS_PATH = '/admin/api/pins'

const CHALLENGE = 'Bearer realm="barbican-admin"'

type Route = (req: IncomingMessage, res: ServerResponse) => Promise<void>

export function adminRoutes(access: AdminAccess, handlers: AdminHandlers): Map<string, Route> {
  const routes = new Map<string, Route>()
  routes.set(ADMIN_STATUS_PATH, async (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return sendRpcError(res, 405, 'Use GET', { headers: { allow: 'GET, HEAD' } })
    }
    const caller = await admit(req, res, access)
    if (caller === undefined) return
    sendJson(res, 200, await handlers.status(caller), req.method === 'HEAD')
  })
  for (const [path, read] of [
    [ADMIN_AUDIT_PATH, handlers.audit],
    [ADMIN_PINS_PATH, handlers.pins],
  ] as const) {
    if (read === undefined) continue
    routes.set(path, async (req, res) => {
      if (req.method !== 'GET')
        return sendRpcError(res, 405, 'Use GET', { headers: { allow: 'GET' } })
      const caller = await admit(req, res, access)
      if (caller === undefined) return
      const query = new URL(req.url ?? '/', 'http://localhost').searchParams
      sendJson(res, 200, await read.call(handlers, caller, query))
    })
  }
  const decide = handlers.decidePin
  if (decide !== undefined) {
    for (const decision of ['approve', 'reject'] as const) {
      const path = `${ADMIN_PINS_PATH}/${decision}`
      routes.set(path, async (req, res) => {
        if (req.method !== 'POST') {
          return sendRpcError(res, 405, 'Use POST', { headers: { allow: 'POST' } })
        }
        // As for reload: the JSON content type is this route's CSRF defence.
        if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
          req.resume()
          return sendRpcError(res, 415, `POST ${path} needs Content-Type: application/json`)
        }
        const caller = await admit(req, res, access)
        if (caller === undefined) {
          req.resume()
          return
        }
        const text = await readTextBody(req, res, PIN_DECISION_MAX_BYTES)
        if (text === undefined) return
        const target = pinTargetOf(text)
        if (typeof target === 'string') return sendRpcError(res, 400, target)
        if (!(await decide.call(handlers, caller, decision, target))) {
          return sendRpcError(
            res,
            404,
            `No pending change for ${target.key} of upstream "${target.upstream}"`,
          )
        }
        sendJson(res, 200, { ok: true, decision, ...target })
      })
    }
  }
  routes.set(ADMIN_RELOAD_PATH, async (req, res) => {
    if (req.method !== 'POST') {
      return sendRpcError(res, 405, 'Use POST', { headers: { allow: 'POST' } })
    }
    // A browser sends a cross-site application/json POST only after a CORS preflight, which
    // the Origin check refuses: the content type is the CSRF defence of this route.
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
      return sendRpcError(res, 415, 'POST /admin/api/reload needs Content-Type: application/json')
    }
    req.resume()
    const caller = await admit(req, res, access)
    if (caller === undefined) return
    if (tenantOfCaller(caller) !== undefined) {
      // The file holds every tenant: a tenant admin changes only what is theirs.
      return sendRpcError(res, 403, 'Reloading the configuration needs an admin without a tenant')
    }
    const result = await handlers.reload(caller)
    sendJson(res, result.ok ? 200 : 422, result)
  })
  return routes
}

/** `{upstream, key}`, or the reason the body is not that. */
function pinTargetOf(text: string): PinTarget | string {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return 'The body is not JSON; send {"upstream": "NAME", "key": "tool:NAME"}'
  }
  const { upstream, key } = (body ?? {}) as Record<string, unknown>
  if (typeof upstream !== 'string' || upstream === '' || typeof key !== 'string' || key === '') {
    return 'The body needs "upstream" and "key", both non-empty strings'
  }
  return { upstream, key }
}

/** Returns who asked, or undefined after answering the refusal. */
async function admit(
  req: IncomingMessage,
  res: ServerResponse,
  access: AdminAccess,
): Promise<AdminCaller | undefined> {
  if (access.authenticator === undefined) {
    if (access.loopback) return 'loopback'
    sendRpcError(
      res,
      403,
      'The admin API is closed on a non-loopback bind without inbound authentication',
    )
    return undefined
  }
  const result = await access.authenticator.authenticate(req.headers, undefined)
  if (!result.ok) {
    sendRpcError(res, result.status, result.message, {
      headers: { 'www-authenticate': result.wwwAuthenticate || CHALLENGE },
    })
    return undefined
  }
  if (isAdmin(result.identity)) return result.identity
  sendRpcError(res, 403, `The admin API needs the scope ${ADMIN_SCOPE}`, {
    headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${ADMIN_SCOPE}"` },
  })
  return undefined
}

function sendJson(res: ServerResponse, status: number, body: unknown, head = false): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
  res.end(head ? undefined : JSON.stringify(body))
}
