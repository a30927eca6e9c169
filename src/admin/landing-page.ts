/**
 * `GET /`: a small status page for a person who opens Barbican's address in a browser, instead
 * of a JSON-RPC error. It is public (a browser sends no token), so what it shows follows least
 * privilege (ADR 025): without inbound auth (a loopback bind, or an operator who accepted an open
 * one) it shows the version, every upstream's state and last error, and each virtual server's
 * endpoints; with inbound auth it shows only that MCP lives at /mcp and needs a token, never
 * upstream names, errors, virtual server names or the version.
 *
 * Upstream errors, and names, can carry text an upstream chose: everything interpolated is
 * escaped, hidden characters shown as escapes, and the strict CSP allows no script at all and only
 * the page's own stylesheet (by hash), so even a missed escape could not run code.
 */
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { UpstreamStatus } from '../gateway/gateway.ts'
import { printableName } from '../protocol/item-names.ts'

/** What the page may show, read on each request so states are current. */
export interface LandingPageSource {
  readonly version: string
  /** Whether inbound auth is configured: then the page shows no details to anonymous callers. */
  readonly authenticated: boolean
  /** Virtual server names. */
  readonly servers: readonly string[]
  readonly status: () => readonly UpstreamStatus[]
}

const STYLE =
  'body{font:15px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}' +
  'table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.25rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}' +
  'code{font:13px ui-monospace,monospace}.ready,.idle{color:#176b2c}.failed,.degraded{color:#a4161a}.err{font:13px ui-monospace,monospace;word-break:break-all}'

const STYLE_HASH = `sha256-${createHash('sha256').update(STYLE, 'utf8').digest('base64')}`

/** No script, no frames, no forms, nothing fetched but the inline stylesheet above. */
export const LANDING_PAGE_CSP = `default-src 'none'; style-src '${STYLE_HASH}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`

/** The route handler for `/`. */
export function landingPage(source: LandingPageSource) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, {
        'content-type': 'text/plain; charset=utf-8',
        'x-content-type-options': 'nosniff',
        allow: 'GET, HEAD',
      })
      res.end("This is Barbican's status page; MCP clients connect to /mcp.\n")
      return
    }
    const body = render(source)
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      'content-security-policy': LANDING_PAGE_CSP,
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
    })
    res.end(req.method === 'HEAD' ? undefined : body)
  }
}

function render(source: LandingPageSource): string {
  const parts = [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>Barbican</title><style>${STYLE}</style></head><body>`,
  ]
  if (source.authenticated) {
    parts.push(
      '<h1>Barbican</h1>',
      '<p>This MCP gateway requires authentication. Point your MCP client at <code>/mcp</code> ',
      'with a token or API key (<code>Authorization: Bearer …</code>).</p>',
      '<p>Upstream status is not shown to anonymous visitors.</p>',
    )
  } else {
    const upstreams = source.status()
    parts.push(
      `<h1>Barbican <small>${text(source.version)}</small></h1>`,
      '<h2>Upstreams</h2>',
      upstreams.length === 0
        ? '<p>No upstream is configured.</p>'
        : `<table><tr><th>upstream</th><th>state</th><th>last error</th></tr>${upstreams
            .map(
              (u) =>
                `<tr><td>${text(u.name)}</td><td class="${text(u.state)}">${text(u.state)}</td>` +
                `<td class="err">${u.error === undefined ? '' : text(u.error, 500)}</td></tr>`,
            )
            .join('')}</table>`,
      '<h2>Endpoints</h2><table><tr><th>virtual server</th><th>Streamable HTTP</th><th>SSE</th><th>WebSocket</th></tr>',
      ...source.servers.map((name) => {
        const suffix = name === 'default' ? '' : `/${encodeURIComponent(name)}`
        return `<tr><td>${text(name)}</td><td><code>/mcp${text(suffix)}</code></td><td><code>/sse${text(suffix)}</code></td><td><code>/ws${text(suffix)}</code></td></tr>`
      }),
      '</table>',
      '<p>Operations: <code>/healthz</code>, <code>/readyz</code>, <code>/metrics</code>.</p>',
    )
  }
  parts.push(
    '<p>Operators: the <a href="/admin">admin console</a> (needs the admin permission when ' +
      'inbound auth is on), or the <code>barbican</code> command.</p>',
  )
  parts.push('</body></html>')
  return parts.join('')
}

/** Hidden characters as escapes, then HTML-escaped. */
function text(value: string, width = 120): string {
  return printableName(value, width).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
