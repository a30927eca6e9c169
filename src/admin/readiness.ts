/**
 * `GET /readyz`: 200 when every upstream is ready or idle, 503 otherwise. Upstream names and
 * their last errors (which may quote a server's stderr) are shown only where the gateway's other
 * operator pages are open: without inbound auth, or to a caller with the admin scope. Anyone
 * else, a load balancer's probe included, gets the status and the counts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isAdmin } from '../auth/admin.ts'
import type { InboundAuthenticator } from '../auth/authenticator.ts'
import type { UpstreamStatus } from '../gateway/gateway.ts'
import type { Confinement } from '../sandbox/confine.ts'

export function readinessRoute(
  status: () => readonly UpstreamStatus[],
  /** Inbound authentication, when configured: details then need the admin scope. */
  authenticator: InboundAuthenticator | undefined,
  /**
   * How each stdio upstream is confined on this host (src/sandbox/confine.ts), shown with its
   * details, so an upstream run unconfined by `sandbox.fallback` is visible here too.
   */
  confinement: (upstream: string) => Confinement | undefined = () => undefined,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    const upstreams = status().map((u) => {
      const sandbox = confinement(u.name)
      return sandbox === undefined ? u : { ...u, sandbox }
    })
    const readyCount = upstreams.filter((u) => u.state === 'ready' || u.state === 'idle').length
    const ready = readyCount === upstreams.length
    const summary = {
      status: ready ? 'ready' : 'degraded',
      ready: readyCount,
      total: upstreams.length,
    }
    const details = authenticator === undefined || (await callerIsAdmin(req, authenticator))
    const body = JSON.stringify(details ? { ...summary, upstreams } : summary)
    res.writeHead(ready ? 200 : 503, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
    })
    res.end(body)
  }
}

async function callerIsAdmin(req: IncomingMessage, authenticator: InboundAuthenticator) {
  if (req.headers.authorization === undefined) return false
  const result = await authenticator.authenticate(req.headers, undefined)
  return result.ok && isAdmin(result.identity)
}
