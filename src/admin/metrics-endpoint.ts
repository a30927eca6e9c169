/**
 * `GET /metrics`: the Prometheus text exposition, and who may read it (docs/observability.md,
 * ADR 028). Metrics name every upstream, virtual server and tool and show who is busy: on a
 * loopback bind they stay open as they always were; elsewhere they need the scrape token or
 * an admin credential, except on a gateway that authenticates nobody at all.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { ADMIN_SCOPE, isAdmin } from '../auth/admin.ts'
import type { InboundAuthenticator } from '../auth/authenticator.ts'
import { bearerToken } from '../auth/authenticator.ts'
import type { MetricsConfig } from '../config/config.ts'
import type { GatewayMetrics } from '../telemetry/metrics.ts'
import { sendRpcError } from '../transports/http-io.ts'

export interface MetricsAccess {
  /** The listener is bound to a loopback address. */
  readonly loopback: boolean
  /** Inbound authentication, when configured (callers with the admin scope may read). */
  readonly authenticator: InboundAuthenticator | undefined
  /** `metrics.token`. */
  readonly token: string | undefined
}

/** Who may read: `open` (anyone), or the token and/or admin credentials. */
export function metricsPolicy(access: MetricsAccess): 'open' | 'guarded' {
  if (access.token !== undefined) return 'guarded'
  if (access.loopback) return 'open'
  // A non-loopback gateway without inbound auth runs only by the operator's explicit consent
  // (--allow-insecure-non-loopback); its MCP endpoint is as open as this one.
  return access.authenticator === undefined ? 'open' : 'guarded'
}

const CHALLENGE = 'Bearer realm="barbican-metrics"'

export function metricsRoute(
  metrics: GatewayMetrics | undefined,
  config: MetricsConfig,
  access: MetricsAccess,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const policy = metricsPolicy(access)
  const token = access.token === undefined ? undefined : digest(access.token)
  return async (req, res) => {
    if (metrics === undefined || !config.enabled) {
      return refuse(res, 404, 'Metrics are disabled (metrics.enabled: false)')
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return refuse(res, 405, 'Use GET', { allow: 'GET, HEAD' })
    }
    if (policy === 'guarded') {
      const refusal = await admit(req, token, access.authenticator)
      if (refusal) return refuse(res, refusal.status, refusal.message, refusal.headers)
    }
    const body = await metrics.exposition()
    res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' })
    res.end(req.method === 'HEAD' ? undefined : body)
  }
}

interface Refusal {
  readonly status: 401 | 403 | 503
  readonly message: string
  readonly headers: Record<string, string>
}

/** The scrape token, else a credential with the admin scope; undefined admits the request. */
async function admit(
  req: IncomingMessage,
  token: Buffer | undefined,
  authenticator: InboundAuthenticator | undefined,
): Promise<Refusal | undefined> {
  let presented: string
  try {
    presented = bearerToken(req.headers.authorization)
  } catch (err) {
    return {
      status: 401,
      message: (err as Error).message,
      headers: { 'www-authenticate': CHALLENGE },
    }
  }
  // Compared as digests: equal lengths, and the time taken tells nothing about the token.
  if (token !== undefined && timingSafeEqual(digest(presented), token)) return undefined
  if (authenticator === undefined) {
    return {
      status: 401,
      message: 'The token is not the metrics token',
      headers: { 'www-authenticate': `${CHALLENGE}, error="invalid_token"` },
    }
  }
  // A credential for any of the gateway's virtual servers, carrying the admin scope.
  const result = await authenticator.authenticate(req.headers, undefined)
  if (!result.ok) {
    return {
      status: result.status,
      message: result.message,
      headers: { 'www-authenticate': result.wwwAuthenticate },
    }
  }
  if (isAdmin(result.identity)) return undefined
  return {
    status: 403,
    message: `Reading /metrics needs the scope ${ADMIN_SCOPE} or the metrics token`,
    headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${ADMIN_SCOPE}"` },
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest()
}

/** The refusals every HTTP route of Barbican gives: a JSON-RPC error body with the reason. */
function refuse(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  sendRpcError(res, status, message, { headers })
}
