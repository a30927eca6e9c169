/**
 * The user's side of linking an upstream account, scripted: calling a tool to get the link URL,
 * opening the link page (its browser cookie and the issuer URL it continues to), and following
 * the issuer's redirects with a cookie jar as a browser would.
 */
import assert from 'node:assert/strict'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

/** Follows redirects by hand with a cookie jar until `stop` matches. */
export async function browse(start: string, stop: (url: URL) => boolean): Promise<URL> {
  const jar = new Map<string, string>()
  let url = new URL(start)
  for (let hop = 0; hop < 10; hop++) {
    if (stop(url)) return url
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} })
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1))
    }
    const body = await res.text()
    const location = res.headers.get('location')
    if (location === null) throw new Error(`no redirect from ${url} (HTTP ${res.status}): ${body}`)
    url = new URL(location, url)
  }
  throw new Error('too many redirects')
}

/** An MCP client of `url` presenting `key` as its bearer token. */
export async function connect(url: string, key: string): Promise<Client> {
  const client = new Client({ name: 'linker', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  )
  return client
}

/** Calls `whoami`, expecting the call to need a link; returns the link URL from the error. */
export async function linkUrlFrom(client: Client, upstream: string): Promise<string> {
  const error = await client.callTool({ name: 'whoami', arguments: {} }).then(
    () => assert.fail('the call should need a link'),
    (err: Error) => err,
  )
  const pattern = new RegExp(`(https?://[^\\s"]+/link/${upstream}\\?ticket=[\\w-]+)`)
  const url = pattern.exec(error.message)?.[1]
  assert.ok(url, error.message)
  return url
}

/** Opens the link page: the browser-binding cookie and the issuer URL it continues to. */
export async function openLinkPage(linkUrl: string): Promise<{ cookie: string; authorize: URL }> {
  const res = await fetch(linkUrl)
  const html = await res.text()
  assert.equal(res.status, 200, html)
  const [line] = res.headers.getSetCookie()
  assert.ok(line, 'the link page sets a cookie')
  const href = (/id="continue" href="([^"]+)"/.exec(html)?.[1] ?? '').replaceAll('&#38;', '&')
  return { cookie: line.split(';')[0]!, authorize: new URL(href) }
}

/** What `whoami` saw: the upstream token's claims. */
export async function upstreamClaims(client: Client): Promise<Record<string, unknown>> {
  const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
    content: { text: string }[]
  }
  const seen = JSON.parse(result.content[0]!.text) as { authorization: string }
  const token = seen.authorization.replace(/^Bearer /, '')
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<
    string,
    unknown
  >
}
