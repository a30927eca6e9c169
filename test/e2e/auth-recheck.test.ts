/**
 * The credential is checked on every message, on every transport, for the session's own virtual
 * server, the way an attacker would probe it: a WebSocket kept open past its JWT's expiry or its
 * API key's revocation is closed with a reason; a token for `/mcp` (or one without a server's
 * step-up scope) is refused on the `/messages` endpoint of an `/sse/ops` session; and a refreshed
 * token with fewer scopes takes the session's rights away, over Streamable HTTP and legacy SSE.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import WebSocket from 'ws'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const INIT_PARAMS = {
  protocolVersion: '2025-06-18',
  capabilities: {},
  clientInfo: { name: 'attacker', version: '1' },
}

interface Reply {
  readonly id?: number
  readonly result?: { content?: { text: string }[]; isError?: boolean }
  readonly error?: { code: number; message: string }
}

/** A raw WebSocket MCP client: requests by id, and the close frame the server sent. */
async function openSocket(url: string, authorization: string) {
  const ws = new WebSocket(url, 'mcp', { headers: { authorization } })
  const waiting = new Map<number, (reply: Reply) => void>()
  ws.on('message', (data) => {
    const reply = JSON.parse(String(data)) as Reply
    if (typeof reply.id === 'number') waiting.get(reply.id)?.(reply)
  })
  const frame = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  )
  /** The close frame, or a rejection when the server keeps the socket open for 5 s. */
  const closed = () =>
    new Promise<{ code: number; reason: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the server kept the socket open')), 5_000)
      void frame.then((f) => {
        clearTimeout(timer)
        resolve(f)
      })
    })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  const ask = (id: number, method: string, params: unknown = {}) =>
    new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to ${method}`)), 10_000)
      waiting.set(id, (reply) => {
        clearTimeout(timer)
        resolve(reply)
      })
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
    })
  return { ws, ask, closed }
}

/** A legacy HTTP+SSE stream read by hand: the endpoint event, then messages by id. */
async function openSse(url: string, authorization: string) {
  const controller = new AbortController()
  const res = await fetch(url, {
    headers: { authorization, accept: 'text/event-stream' },
    signal: controller.signal,
  })
  assert.equal(res.status, 200)
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  const events: { event: string; data: string }[] = []
  const listeners: (() => void)[] = []
  let buffer = ''
  void (async () => {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }))
      if (done) return
      buffer += decoder.decode(value, { stream: true })
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message'
        const data = /^data: (.*)$/m.exec(block)?.[1]
        if (data !== undefined) events.push({ event, data })
        for (const listener of listeners.splice(0)) listener()
      }
    }
  })()
  const next = async (match: (e: { event: string; data: string }) => boolean) => {
    const deadline = Date.now() + 10_000
    for (;;) {
      const found = events.find(match)
      if (found) return found
      if (Date.now() > deadline) throw new Error('no such SSE event')
      await new Promise<void>((resolve) => {
        listeners.push(resolve)
        setTimeout(resolve, 200)
      })
    }
  }
  const endpoint = (await next((e) => e.event === 'endpoint')).data
  const reply = async (id: number) =>
    JSON.parse(
      (await next((e) => e.event === 'message' && JSON.parse(e.data).id === id)).data,
    ) as Reply
  return { endpoint, reply, close: () => controller.abort() }
}

describe('the credential is checked on every message, for the session’s own server', () => {
  let issuer: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  const dave = generateApiKey()

  before(async () => {
    issuer = await startIssuer({ clients: [] })
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      servers: { default: {}, ops: { upstreams: ['rec'] } },
      auth: {
        scopes: ['mcp:tools'],
        serverScopes: { ops: ['mcp:admin'] },
        jwt: { issuer: issuer.issuer, algorithms: ['ES256'], clockToleranceSeconds: 0 },
        apiKeys: {
          keys: [{ id: 'dave-ci', hash: dave.hash, subject: 'dave', scopes: ['mcp:tools'] }],
        },
        // Every caller may use the servers; tools only with mcp:write in the current token.
        permissions: [
          { scopes: ['mcp:tools'], servers: ['*'], tools: ['no-such-tool'] },
          { scopes: ['mcp:write'], servers: ['*'], tools: ['*'] },
        ],
        network: { allow: ['127.0.0.1'] },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
    await issuer?.close()
  })

  const token = (server_: string, scope: string, lifetimeSeconds = 300, sub = 'alice') => {
    const now = Math.floor(Date.now() / 1000)
    const aud = server_ === 'default' ? `${server.url}/mcp` : `${server.url}/mcp/${server_}`
    return issuer.sign({
      iss: issuer.issuer,
      aud,
      sub,
      scope,
      iat: now,
      exp: now + lifetimeSeconds,
    })
  }

  test('a JWT that expires on an open WebSocket closes it with 1008 and the reason', async () => {
    const jwt = await token('default', 'mcp:tools mcp:write', 2)
    const { ask, closed } = await openSocket(
      `${server.url.replace('http', 'ws')}/ws`,
      `Bearer ${jwt}`,
    )
    assert.ok((await ask(1, 'initialize', INIT_PARAMS)).result)
    assert.ok((await ask(2, 'tools/list')).result, 'works while the token is valid')
    // Past `exp` (whole seconds, no clock tolerance configured).
    await new Promise((resolve) => setTimeout(resolve, 3_100))
    const before = upstream.requests.length
    void ask(3, 'tools/call', { name: 'whoami', arguments: {} }).catch(() => {})
    const { code, reason } = await closed()
    assert.equal(code, 1008)
    assert.match(reason, /Credential rejected: The token has expired/)
    const calls = upstream.requests
      .slice(before)
      .filter((r) => (r.body as { method?: string })?.method === 'tools/call')
    assert.equal(calls.length, 0, 'the message after expiry never reached the upstream')
  })

  test('an API key revoked while its WebSocket is open: the next message is refused', async () => {
    const { ask, closed } = await openSocket(
      `${server.url.replace('http', 'ws')}/ws`,
      `Bearer ${dave.key}`,
    )
    try {
      assert.ok((await ask(1, 'initialize', INIT_PARAMS)).result)
      assert.ok((await ask(2, 'tools/list')).result)
      assert.equal(server.auth?.apiKeys?.revoke('dave-ci'), true)
      void ask(3, 'tools/list').catch(() => {})
      const { code, reason } = await closed()
      assert.equal(code, 1008)
      assert.match(reason, /Credential rejected: The API key is unknown or revoked/)
    } finally {
      server.auth?.apiKeys?.add({ id: 'dave-ci', hash: dave.hash, subject: 'dave' })
    }
  })

  test('/messages of an /sse/ops session refuses a token for /mcp and one lacking ops’ step-up scope', async () => {
    const full = await token('ops', 'mcp:tools mcp:admin mcp:write')
    const sse = await openSse(`${server.url}/sse/ops`, `Bearer ${full}`)
    const post = async (authorization: string, id: number) => {
      const res = await fetch(new URL(sse.endpoint, server.url), {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' }),
      })
      await res.body?.cancel()
      return res
    }
    try {
      assert.equal((await post(`Bearer ${full}`, 1)).status, 202)
      // Same subject, same issuer, valid signature: minted for the default server's resource.
      const forMcp = await post(`Bearer ${await token('default', 'mcp:tools mcp:admin')}`, 2)
      assert.equal(forMcp.status, 401)
      assert.match(forMcp.headers.get('www-authenticate') ?? '', /audience/)
      // For ops, but without the mcp:admin step-up scope that ops requires.
      const noStepUp = await post(`Bearer ${await token('ops', 'mcp:tools')}`, 3)
      assert.equal(noStepUp.status, 403)
      assert.match(noStepUp.headers.get('www-authenticate') ?? '', /insufficient_scope/)
      assert.match(noStepUp.headers.get('www-authenticate') ?? '', /mcp:admin/)
    } finally {
      sse.close()
    }
  })

  test('a refreshed token with fewer scopes loses the rights on a Streamable HTTP session', async () => {
    const post = async (jwt: string, body: object, sessionId?: string) => {
      const res = await fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${jwt}`,
          'content-type': 'application/json',
          accept: 'application/json',
          ...(sessionId
            ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' }
            : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', ...body }),
      })
      return { res, reply: (await res.json().catch(() => undefined)) as Reply | undefined }
    }
    const first = await token('default', 'mcp:tools mcp:write')
    const init = await post(first, { id: 1, method: 'initialize', params: INIT_PARAMS })
    const sessionId = init.res.headers.get('mcp-session-id') ?? undefined
    assert.ok(sessionId)
    const call = { method: 'tools/call', params: { name: 'whoami', arguments: {} } }
    const allowed = await post(first, { id: 2, ...call }, sessionId)
    assert.equal(allowed.reply?.error, undefined, 'mcp:write lets the first token call')
    // The client refreshes its token; the authorization server grants less this time.
    const refreshed = await token('default', 'mcp:tools')
    const denied = await post(refreshed, { id: 3, ...call }, sessionId)
    assert.match(denied.reply?.error?.message ?? '', /may not call the tool "whoami"/)
    const listed = await post(refreshed, { id: 4, method: 'tools/list' }, sessionId)
    assert.deepEqual(listed.reply?.result, { tools: [] })
  })

  test('a refreshed token with fewer scopes loses the rights on a legacy SSE session', async () => {
    const first = await token('default', 'mcp:tools mcp:write')
    const sse = await openSse(`${server.url}/sse`, `Bearer ${first}`)
    const send = async (jwt: string, id: number, method: string, params: object = {}) => {
      const res = await fetch(new URL(sse.endpoint, server.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      })
      await res.body?.cancel()
      assert.equal(res.status, 202)
      return await sse.reply(id)
    }
    try {
      assert.ok((await send(first, 1, 'initialize', INIT_PARAMS)).result)
      const call = { name: 'whoami', arguments: {} }
      assert.equal((await send(first, 2, 'tools/call', call)).error, undefined)
      const refreshed = await token('default', 'mcp:tools')
      const denied = await send(refreshed, 3, 'tools/call', call)
      assert.match(denied.error?.message ?? '', /may not call the tool "whoami"/)
    } finally {
      sse.close()
    }
  })
})
