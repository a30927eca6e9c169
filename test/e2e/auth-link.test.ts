/**
 * Linking an upstream account, end to end, from a script: a user (identified by an API key)
 * calls a tool of an upstream that needs their own account there; Barbican answers with a link;
 * the script follows it through a second real authorization server (oidc-provider: authorization
 * code + PKCE S256, resource indicator, `iss` in the response); and the next tool call carries the
 * stored upstream token, which the upstream verifies. The user's Barbican key never reaches it.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startIssuerGuardedUpstream } from '../fixtures/auth-upstream.ts'
import { browse } from '../support/link-flow.ts'

/** The `name=value` of the cookie a response sets (the link page's browser binding). */
function cookieOf(res: Response): string {
  const [line] = res.headers.getSetCookie()
  assert.ok(line, 'the link page sets a cookie')
  return line.split(';')[0]!
}

describe('linking an upstream account (authorization code + PKCE, refresh with rotation)', () => {
  let upstreamIssuer: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  const alice = generateApiKey()
  const mallory = generateApiKey()
  const seenTokens: string[] = []
  /** Makes the upstream refuse every token, as after a revocation on its side. */
  let refuseAll = false

  before(async () => {
    // Tokens live 20 s, inside Barbican's 30 s refresh margin: every use refreshes (no sleeps).
    upstreamIssuer = await startIssuer({ clients: [], accessTokenTtlSeconds: 20 })
    // The upstream accepts only tokens its own issuer minted for it.
    upstream = await startIssuerGuardedUpstream(upstreamIssuer.issuer, {
      refuse: () => refuseAll,
      onAccepted: (token) => seenTokens.push(token),
    })
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        files: {
          url: upstream.url,
          transport: 'streamable-http',
          credentials: {
            mode: 'oauth',
            issuer: upstreamIssuer.issuer,
            clientId: 'barbican',
            clientSecret: 'barbican-secret',
            scopes: ['mcp:tools'],
          },
        },
      },
      auth: {
        apiKeys: {
          keys: [
            { id: 'alice', hash: alice.hash, subject: 'alice' },
            { id: 'mallory', hash: mallory.hash, subject: 'mallory' },
          ],
        },
        network: { allow: ['127.0.0.1'] },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
    upstreamIssuer.registerClient({
      client_id: 'barbican',
      client_secret: 'barbican-secret',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [`${server.url}/oauth/callback`],
      token_endpoint_auth_method: 'client_secret_basic',
    })
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
    await upstreamIssuer?.close()
  })

  test('with API keys only, a missing key gets a bare Bearer challenge and no metadata exists', async () => {
    const res = await fetch(`${server.url}/mcp`, { method: 'POST', body: '{}' })
    await res.body?.cancel()
    assert.equal(res.status, 401)
    assert.equal(res.headers.get('www-authenticate'), 'Bearer')
    const prm = await fetch(`${server.url}/.well-known/oauth-protected-resource/mcp`)
    await prm.body?.cancel()
    assert.equal(prm.status, 404)
  })

  test('an unlinked call gets the link URL; after the flow the next call uses the stored token', async () => {
    const client = new Client({ name: 'alice', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${alice.key}` } },
      }),
    )
    try {
      const error = await client.callTool({ name: 'whoami', arguments: {} }).then(
        () => assert.fail('the first call should need a link'),
        (err: Error) => err,
      )
      const linkUrl = /(http:\/\/127\.0\.0\.1:\d+\/link\/files\?ticket=[\w-]+)/.exec(
        error.message,
      )?.[1]
      assert.ok(linkUrl, error.message)
      assert.equal(
        upstream.requests.filter((r) => (r.body as { method?: string })?.method === 'tools/call')
          .length,
        0,
        'nothing was sent upstream without credentials',
      )

      // The link page names the user and offers the way to the upstream's authorization server.
      const page = await fetch(linkUrl)
      assert.equal(page.status, 200)
      assert.equal(page.headers.get('x-frame-options'), 'DENY')
      const html = await page.text()
      assert.match(html, /as alice at files/)
      const browserCookie = cookieOf(page)
      const authorize = new URL(
        (/id="continue" href="([^"]+)"/.exec(html)?.[1] ?? '').replaceAll('&#38;', '&'),
      )
      assert.equal(authorize.origin, upstreamIssuer.issuer)
      assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256')
      assert.equal(authorize.searchParams.get('resource'), upstream.url)
      assert.equal(authorize.searchParams.get('redirect_uri'), `${server.url}/oauth/callback`)

      // The ticket is single-use.
      const again = await fetch(linkUrl)
      await again.body?.cancel()
      assert.equal(again.status, 400)

      const callback = await browse(authorize.toString(), (u) => u.pathname === '/oauth/callback')
      assert.equal(callback.searchParams.get('iss'), upstreamIssuer.issuer)
      const done = await fetch(callback, { headers: { cookie: browserCookie } })
      assert.equal(done.status, 200, await done.clone().text())
      assert.match(await done.text(), /linked/)

      const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
        content: { text: string }[]
      }
      const seen = JSON.parse(result.content[0]!.text) as {
        authorization: string
        meta: Record<string, { user: string }>
      }
      assert.equal(seen.meta['dev.barbican/context']?.user, 'alice')
      assert.equal(seen.authorization, `Bearer ${seenTokens.at(-1)}`)
      assert.ok(!JSON.stringify(upstream.requests).includes(alice.key))

      // Expiring tokens are refreshed; the rotated refresh token replaces the used one, or the
      // second refresh would fail (oidc-provider rotates on every use) and ask for a new link.
      const before = seenTokens.length
      for (let i = 0; i < 2; i++) await client.callTool({ name: 'whoami', arguments: {} })
      assert.equal(seenTokens.length, before + 2)
      assert.equal(new Set(seenTokens.slice(-3)).size, 3, 'each call used a fresh access token')

      // The upstream stops accepting the user's token: it is forgotten and the link offered again.
      refuseAll = true
      const refused = await client.callTool({ name: 'whoami', arguments: {} }).then(
        () => assert.fail('a refused token should not succeed'),
        (err: Error) => err,
      )
      refuseAll = false
      assert.match(refused.message, /\/link\/files\?ticket=/)
      const afterwards = await client.callTool({ name: 'whoami', arguments: {} }).then(
        () => assert.fail('the forgotten link should be asked for again'),
        (err: Error) => err,
      )
      assert.match(afterwards.message, /link your files account/)

      // A replayed callback (same state) is refused.
      const replay = await fetch(callback)
      await replay.body?.cancel()
      assert.equal(replay.status, 400)
    } finally {
      await client.close()
    }
  })

  /** A user's client calls the tool and gets the link URL; the client is closed again. */
  async function linkUrlFor(key: string): Promise<string> {
    const client = new Client({ name: 'linker', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}` } },
      }),
    )
    try {
      const error = await client.callTool({ name: 'whoami', arguments: {} }).then(
        () => assert.fail('the call should need a link'),
        (err: Error) => err,
      )
      const url = /(http:\/\/127\.0\.0\.1:\d+\/link\/files\?ticket=[\w-]+)/.exec(error.message)?.[1]
      assert.ok(url, error.message)
      return url
    } finally {
      await client.close()
    }
  }

  /** Opens the link page in a browser: its cookie and the issuer URL it continues to. */
  async function openLinkPage(
    linkUrl: string,
  ): Promise<{ cookie: string; authorize: string; html: string }> {
    const res = await fetch(linkUrl)
    assert.equal(res.status, 200)
    const html = await res.text()
    const authorize = (/id="continue" href="([^"]+)"/.exec(html)?.[1] ?? '').replaceAll(
      '&#38;',
      '&',
    )
    return { cookie: cookieOf(res), authorize, html }
  }

  /** The user at the issuer signs in and consents; the browser lands on Barbican's callback. */
  async function consentAt(authorize: string, login: string): Promise<URL> {
    const before = upstreamIssuer.defaultUser
    upstreamIssuer.defaultUser = login
    try {
      return await browse(authorize, (u) => u.pathname === '/oauth/callback')
    } finally {
      upstreamIssuer.defaultUser = before
    }
  }

  test('the link cookie is HttpOnly, SameSite=Lax and scoped to the callback', async () => {
    const res = await fetch(await linkUrlFor(mallory.key))
    await res.body?.cancel()
    const [line] = res.headers.getSetCookie()
    assert.match(
      line ?? '',
      /^barbican-link-[\w-]{32}=[\w-]{43}; Path=\/oauth\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/,
    )
  })

  test('a consent given in another browser is not linked to the user who started the link', async () => {
    // Mallory starts a link for mallory and sends the issuer URL to Alice, who consents there.
    const attack = await openLinkPage(await linkUrlFor(mallory.key))
    assert.match(attack.html, /This link is for the Barbican user mallory/)
    const withoutCookie = await consentAt(attack.authorize, 'alice-at-files')
    const refused = await fetch(withoutCookie)
    assert.equal(refused.status, 400)
    assert.match(
      await refused.text(),
      /This sign-in was not started in this browser, so it is not linked/,
    )

    // Alice's browser holds a cookie of its own link; neither it nor its nonce passes for Mallory's.
    const alicesOwn = await openLinkPage(await linkUrlFor(alice.key))
    const attack2 = await openLinkPage(await linkUrlFor(mallory.key))
    const callback2 = await consentAt(attack2.authorize, 'alice-at-files')
    const malloryName = attack2.cookie.split('=')[0]!
    const aliceNonce = alicesOwn.cookie.split('=')[1]!
    const otherBrowser = await fetch(callback2, {
      headers: { cookie: `${alicesOwn.cookie}; ${malloryName}=${aliceNonce}` },
    })
    assert.equal(otherBrowser.status, 400)
    assert.match(await otherBrowser.text(), /not started in this browser/)
    // The refused callbacks stored nothing: Mallory still has no linked account.
    assert.match(await linkUrlFor(mallory.key), /\/link\/files\?ticket=/)

    // The browser that started the link completes it.
    const own = await openLinkPage(await linkUrlFor(mallory.key))
    const callback3 = await consentAt(own.authorize, 'mallory-at-files')
    const linked = await fetch(callback3, { headers: { cookie: own.cookie } })
    assert.equal(linked.status, 200, await linked.clone().text())
    assert.match(linked.headers.getSetCookie()[0] ?? '', /^barbican-link-[\w-]+=; .*Max-Age=0/)
    const client = new Client({ name: 'mallory', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${mallory.key}` } },
      }),
    )
    try {
      const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
        content: { text: string }[]
      }
      const seen = JSON.parse(result.content[0]!.text) as { authorization: string }
      const token = seen.authorization.replace(/^Bearer /, '')
      const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as {
        sub: string
      }
      assert.equal(claims.sub, 'mallory-at-files', "only Mallory's own consent was stored")
    } finally {
      await client.close()
    }
  })
})
