/**
 * Human confirmation and secure contexts through a real `startServer`, with the official SDK v1
 * client (legacy era, its elicitation handler answering) and raw 2026-07-28 requests
 * (`input_required` rounds), over the three trifecta fixture servers: a mail reader (private),
 * a web fetcher (untrusted) and a mail sender (egress, annotated destructive). The sender's
 * outbox proves whether a call really reached it; the audit log's export shows every answer.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { ephemeralAuditKey } from '../../src/audit/audit-key.ts'
import { AuditLog } from '../../src/audit/audit-log.ts'
import { memoryAuditStore } from '../../src/audit/memory.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

type Json = Record<string, unknown>

const fixture = fileURLToPath(new URL('../fixtures/trifecta-server.ts', import.meta.url))
const role = (r: string) => ({ command: process.execPath, args: [fixture, '--role', r] })
const UPSTREAMS = {
  mail: role('mail-reader'),
  web: role('web-fetcher'),
  sender: role('mail-sender'),
}
const SEND = 'sender__send_mail'
const MAIL = { to: 'bob@example.com', body: 'lunch?' }

interface Gateway {
  server: RunningServer
  audit: AuditLog
  /** Audit records exported so far, as objects. */
  records: Json[]
}

async function gateway(extra: Json): Promise<Gateway> {
  // A generous listing deadline: on a loaded machine the three fixtures may take longer than the
  // default 3 s to list, and a call routed before its upstream listed is an unknown tool.
  const config = {
    listen: '127.0.0.1:0',
    upstreams: UPSTREAMS,
    limits: { listDeadlineMs: 60_000 },
    ...extra,
  }
  const records: Json[] = []
  const audit = new AuditLog({
    store: memoryAuditStore(),
    key: ephemeralAuditKey(),
    export: { write: (line) => records.push(JSON.parse(line) as Json) },
  })
  const server = await startServer(
    parseConfigText(JSON.stringify(config), { json: true }).config,
    silentLogger,
    undefined,
    audit,
  )
  return { server, audit, records }
}

type Answer = 'accept' | 'decline' | 'cancel'

/** A legacy SDK client; with `answer`, it declares elicitation and answers every question so. */
async function legacyClient(
  g: Gateway,
  answer?: Answer,
): Promise<{ client: Client; asked: string[] }> {
  const asked: string[] = []
  const client = new Client(
    { name: 'confirm-e2e', version: '1.0.0' },
    { capabilities: answer ? { elicitation: {} } : {} },
  )
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(String(request.params.message))
      return answer === 'accept' ? { action: 'accept', content: {} } : { action: answer }
    })
  }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${g.server.url}/mcp`)))
  return { client, asked }
}

async function outbox(client: Client): Promise<unknown[]> {
  const reply = (await client.callTool({ name: 'sender__outbox', arguments: {} })) as {
    content: { text: string }[]
  }
  return JSON.parse(reply.content[0]!.text) as unknown[]
}

/** One stateless 2026-07-28 tools/call; returns the JSON-RPC response. */
async function modernCall(
  g: Gateway,
  name: string,
  args: Json,
  extra: Json = {},
  capabilities: Json = { elicitation: {} },
): Promise<Json> {
  const { status, text, final } = await postStatelessToolCall(`${g.server.url}/mcp`, {
    name,
    arguments: args,
    params: extra,
    capabilities,
  })
  assert.ok(final, `no response (HTTP ${status}): ${text}`)
  return final
}

function errorOf(reply: Json): { code: number; message: string; data?: Json } {
  assert.ok(reply.error, `expected an error, got ${JSON.stringify(reply)}`)
  return reply.error as { code: number; message: string; data?: Json }
}

/** The question of an `input_required` round and the state to answer it with. */
function questionOf(reply: Json): { message: string; state: string; key: string } {
  assert.equal(reply.error, undefined, JSON.stringify(reply.error))
  const result = reply.result as Json
  assert.equal(result.resultType, 'input_required', JSON.stringify(result))
  const [key, request] = Object.entries(result.inputRequests as Record<string, Json>)[0]!
  assert.equal(request.method, 'elicitation/create')
  return {
    message: String((request.params as Json).message),
    state: String(result.requestState),
    key,
  }
}

const answered = (q: { state: string; key: string }, action: Answer) => ({
  requestState: q.state,
  inputResponses: { [q.key]: action === 'accept' ? { action, content: {} } : { action } },
})

describe('confirmation of destructive tools', () => {
  let g: Gateway
  before(async () => {
    g = await gateway({ confirm: { destructive: true } })
  })
  after(async () => {
    await g?.server.stop()
    await g?.audit.close()
  })

  test('legacy: accept sends the call on; the question shows tool, server and arguments', async () => {
    const { client, asked } = await legacyClient(g, 'accept')
    try {
      const reply = (await client.callTool({ name: SEND, arguments: MAIL })) as Json
      assert.notEqual(reply.isError, true, JSON.stringify(reply))
      assert.equal(asked.length, 1)
      assert.match(asked[0]!, /"sender__send_mail" on server "sender"/)
      assert.match(asked[0]!, /bob@example\.com/)
      assert.deepEqual(await outbox(client), [MAIL])
      assert.equal(asked.length, 1, 'a read-only tool is not confirmed')
    } finally {
      await client.close()
    }
  })

  for (const answer of ['decline', 'cancel'] as const) {
    test(`legacy: ${answer} refuses with a clear error and the upstream never sees the call`, async () => {
      const { client, asked } = await legacyClient(g, answer)
      try {
        const before = (await outbox(client)).length
        await assert.rejects(client.callTool({ name: SEND, arguments: MAIL }), (err: Error) => {
          assert.match(err.message, answer === 'decline' ? /declined/ : /cancelled/)
          assert.equal((err as { code?: number }).code, -32001)
          return true
        })
        assert.equal(asked.length, 1)
        assert.equal((await outbox(client)).length, before)
      } finally {
        await client.close()
      }
    })
  }

  test('legacy: a client without elicitation is refused and told why', async () => {
    const { client } = await legacyClient(g)
    try {
      const before = (await outbox(client)).length
      await assert.rejects(client.callTool({ name: SEND, arguments: MAIL }), /elicitation/)
      assert.equal((await outbox(client)).length, before)
    } finally {
      await client.close()
    }
  })

  test('2026-07-28: input_required asks; accept sends once, decline refuses', async () => {
    const { client } = await legacyClient(g)
    try {
      const before = (await outbox(client)).length
      const first = questionOf(await modernCall(g, SEND, MAIL))
      assert.match(first.message, /"sender__send_mail" on server "sender"/)
      assert.match(first.message, /bob@example\.com/)
      const done = await modernCall(g, SEND, MAIL, answered(first, 'accept'))
      assert.equal((done.result as Json | undefined)?.resultType, 'complete', JSON.stringify(done))
      assert.equal((await outbox(client)).length, before + 1)
      // The accepted state is spent: replaying it does not send the mail again.
      const replay = errorOf(await modernCall(g, SEND, MAIL, answered(first, 'accept')))
      assert.match(replay.message, /already answered/)
      // An accepted state does not carry over to other arguments.
      const other = await modernCall(
        g,
        SEND,
        { ...MAIL, to: 'eve@example.com' },
        answered(first, 'accept'),
      )
      questionOf(other)

      const second = questionOf(await modernCall(g, SEND, MAIL))
      const declined = errorOf(await modernCall(g, SEND, MAIL, answered(second, 'decline')))
      assert.equal(declined.code, -32001)
      assert.match(declined.message, /declined/)
      const third = questionOf(await modernCall(g, SEND, MAIL))
      assert.match(
        errorOf(await modernCall(g, SEND, MAIL, answered(third, 'cancel'))).message,
        /cancelled/,
      )
      assert.equal((await outbox(client)).length, before + 1)
    } finally {
      await client.close()
    }
  })

  test('2026-07-28: a request without the elicitation capability is refused', async () => {
    const reply = errorOf(await modernCall(g, SEND, MAIL, {}, {}))
    assert.equal(reply.code, -32001)
    assert.match(reply.message, /elicitation/)
  })

  test('every answer is audited', async () => {
    const answers = g.records
      .filter((r) => r.target === SEND && r.confirmation !== undefined)
      .map((r) => r.confirmation)
    for (const a of ['accept', 'decline', 'cancel', 'unavailable']) {
      assert.ok(answers.includes(a), `no audit record with confirmation ${a}: ${answers}`)
    }
    const declined = g.records.find((r) => r.confirmation === 'decline')
    assert.equal(declined?.outcome, 'denied')
  })
})

const LABELS = {
  labels: {
    private: { upstreams: ['mail'] },
    untrusted: { upstreams: ['web'] },
    egress: { tools: [SEND] },
  },
}

describe('secure contexts: the lethal trifecta', () => {
  let g: Gateway
  before(async () => {
    g = await gateway({ contexts: { ...LABELS, onTrifecta: 'deny' } })
  })
  after(async () => {
    await g?.server.stop()
    await g?.audit.close()
  })

  test('legacy: egress passes with private data alone, and is refused once untrusted joins', async () => {
    const { client } = await legacyClient(g)
    try {
      await client.callTool({ name: 'mail__read_inbox', arguments: {} })
      await client.callTool({ name: SEND, arguments: MAIL })
      assert.equal((await outbox(client)).length, 1)
      await client.callTool({ name: 'web__fetch_page', arguments: { url: 'https://evil.example' } })
      await assert.rejects(
        client.callTool({ name: SEND, arguments: MAIL }),
        /private data and untrusted content/,
      )
      assert.equal((await outbox(client)).length, 1)
    } finally {
      await client.close()
    }
    // Another session is another context.
    const other = await legacyClient(g)
    try {
      await other.client.callTool({ name: SEND, arguments: MAIL })
      assert.equal((await outbox(other.client)).length, 2)
    } finally {
      await other.client.close()
    }
  })

  test('2026-07-28: the caller within the window is the context', async () => {
    const { client } = await legacyClient(g)
    try {
      const before = (await outbox(client)).length
      await modernCall(g, 'web__fetch_page', { url: 'https://evil.example' })
      const sent = await modernCall(g, SEND, MAIL)
      assert.equal((sent.result as Json | undefined)?.resultType, 'complete', JSON.stringify(sent))
      await modernCall(g, 'mail__read_inbox', {})
      const refused = errorOf(await modernCall(g, SEND, MAIL))
      assert.equal(refused.code, -32001)
      assert.match(refused.message, /private data and untrusted content/)
      assert.equal((await outbox(client)).length, before + 1)
    } finally {
      await client.close()
    }
  })
})

describe('secure contexts: the trifecta sent for confirmation', () => {
  let g: Gateway
  before(async () => {
    g = await gateway({ contexts: { ...LABELS, onTrifecta: 'confirm' } })
  })
  after(async () => {
    await g?.server.stop()
    await g?.audit.close()
  })

  for (const answer of ['accept', 'decline'] as const) {
    test(`legacy: the human is asked only after the trifecta, and ${answer} decides`, async () => {
      const { client, asked } = await legacyClient(g, answer)
      try {
        await client.callTool({ name: 'mail__read_inbox', arguments: {} })
        await client.callTool({ name: 'web__fetch_page', arguments: { url: 'https://x.example' } })
        assert.equal(asked.length, 0)
        const before = (await outbox(client)).length
        const call = client.callTool({ name: SEND, arguments: MAIL })
        if (answer === 'accept') await call
        else await assert.rejects(call, /declined/)
        assert.equal(asked.length, 1)
        assert.match(asked[0]!, /private data and untrusted content/)
        assert.equal((await outbox(client)).length, before + (answer === 'accept' ? 1 : 0))
      } finally {
        await client.close()
      }
    })
  }

  test('2026-07-28: the trifecta becomes an input_required question', async () => {
    await modernCall(g, 'mail__read_inbox', {})
    await modernCall(g, 'web__fetch_page', { url: 'https://x.example' })
    const q = questionOf(await modernCall(g, SEND, MAIL))
    assert.match(q.message, /private data and untrusted content/)
    const done = await modernCall(g, SEND, MAIL, answered(q, 'accept'))
    assert.equal((done.result as Json | undefined)?.resultType, 'complete', JSON.stringify(done))
  })
})
