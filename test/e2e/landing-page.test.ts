/**
 * `GET /` as a person meets it in a browser: a status page, never a JSON-RPC error, that shows
 * hostile upstream errors as inert text under a CSP allowing no script, and that shows nothing
 * about upstreams to an anonymous visitor once inbound auth is configured.
 */
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { VERSION } from '../../src/common/version.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

/** An upstream that cannot start, with markup and a bidi override in what its error repeats. */
const HOSTILE = '/nonexistent/<script>alert(1)</script>\u202eevil'

function config(auth?: Record<string, unknown>) {
  return normalizeConfig({
    listen: '127.0.0.1:0',
    ...(auth ? { auth } : {}),
    upstreams: { broken: { command: HOSTILE, args: [] } },
    servers: { default: {}, ops: { upstreams: ['broken'] } },
  })
}

const browser = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' }

/** A raw request, so the Host header can be anything. */
function raw(url: string, method: string, headers: Record<string, string>) {
  return new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
    const req = request(`${url}/`, { method, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (body += chunk))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] ?? '', body }),
      )
    })
    req.on('error', reject)
    req.end()
  })
}

describe('the landing page without inbound auth', () => {
  let server: RunningServer
  before(async () => {
    server = await startServer(config(), silentLogger)
    await server.started
  })
  after(() => server.stop())

  test('shows the version, upstream states with escaped errors, and the endpoints', async () => {
    const res = await fetch(`${server.url}/`, { headers: browser })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8')
    const csp = res.headers.get('content-security-policy') ?? ''
    assert.match(csp, /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*';/)
    assert.match(csp, /frame-ancestors 'none'/)
    assert.doesNotMatch(csp, /unsafe-inline|script-src/)
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
    const page = await res.text()
    assert.ok(page.includes(`Barbican <small>${VERSION}</small>`), page)
    assert.match(page, /<td>broken<\/td><td class="failed">failed<\/td>/)
    // The error repeats the command: as text, never as markup, hidden characters spelled out.
    assert.ok(page.includes('&#60;script&#62;alert(1)&#60;/script&#62;\\u{202e}evil'), page)
    assert.ok(!page.includes('<script') && !page.includes('\u202e'), page)
    assert.match(page, /<td>default<\/td><td><code>\/mcp<\/code><\/td>/)
    assert.match(page, /<td>ops<\/td><td><code>\/mcp\/ops<\/code><\/td>/)
    assert.match(page, /the <a href="\/admin">admin console<\/a>/)
  })

  test('answers HEAD without a body, and other methods and a foreign Host without JSON-RPC', async () => {
    const head = await raw(server.url, 'HEAD', browser)
    assert.equal(head.status, 200)
    assert.equal(head.body, '')
    const post = await raw(server.url, 'POST', browser)
    assert.equal(post.status, 405)
    assert.match(post.type, /^text\/plain/)
    assert.match(post.body, /MCP clients connect to \/mcp/)
    const rebinding = await raw(server.url, 'GET', { ...browser, host: 'evil.example:80' })
    assert.equal(rebinding.status, 403)
    assert.match(rebinding.type, /^text\/plain/)
    assert.doesNotMatch(rebinding.body, /jsonrpc/)
    assert.match(rebinding.body, /Host "evil\.example:80" is not in the allowed hosts/)
  })
})

describe('the landing page with inbound auth', () => {
  let server: RunningServer
  before(async () => {
    server = await startServer(
      config({ apiKeys: { keys: [{ id: 'k', hash: `sha256:${'0'.repeat(64)}`, subject: 's' }] } }),
      silentLogger,
    )
    await server.started
  })
  after(() => server.stop())

  test('tells an anonymous visitor where MCP is, and nothing about upstreams or servers', async () => {
    const res = await fetch(`${server.url}/`, { headers: browser })
    assert.equal(res.status, 200)
    // What is shown: the body, after the stylesheet (which names the state classes).
    const page = (await res.text()).split('</style>')[1] ?? ''
    assert.match(page, /requires authentication/)
    assert.match(page, /<code>\/mcp<\/code>/)
    for (const secret of ['broken', 'failed', 'nonexistent', 'ops', VERSION]) {
      assert.ok(!page.includes(secret), `${secret} shown: ${page}`)
    }
  })
})
