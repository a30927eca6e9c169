/**
 * What one caller may buy with the meta-tools (issue 31 point 3, ADR 105), through a real
 * gateway over the official server-memory, with the SDK v1 client: the per-caller rate of
 * search_tools and run_code, the largest result limit, and the note a bounded search adds when
 * it left words out. The CPU and latency figures are in bench/amplifiers.ts.
 */
import assert from 'node:assert/strict'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

const MEMORY = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-memory/dist/index.js', import.meta.url),
)
type Json = Record<string, unknown>

const alice = generateApiKey()
const bob = generateApiKey()

async function client(url: string, key: string): Promise<Client> {
  const c = new Client({ name: 'amplifiers-e2e', version: '1.0.0' })
  await c.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  )
  return c
}

async function refusal(call: Promise<unknown>): Promise<McpError> {
  try {
    await call
  } catch (err) {
    if (err instanceof McpError) return err
    throw err
  }
  assert.fail('the call was not refused')
}

describe('meta-tool bounds', () => {
  let server: RunningServer
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-amplifiers-'))
    const config = {
      listen: '127.0.0.1:0',
      upstreams: {
        memory: {
          command: process.execPath,
          args: [MEMORY],
          env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
        },
      },
      servers: {
        default: { tools: { mode: 'search' } },
        code: { tools: { mode: 'code' } },
      },
      limits: { metaToolCallsPerMinute: 3, searchMaxResults: 5, searchMaxTerms: 4 },
      auth: {
        apiKeys: {
          keys: [
            { id: 'a', hash: alice.hash, subject: 'alice' },
            { id: 'b', hash: bob.hash, subject: 'bob' },
          ],
        },
        permissions: [{ subjects: ['alice', 'bob'], servers: ['*'] }],
      },
    }
    server = await startServer(
      parseConfigText(JSON.stringify(config), { json: true }).config,
      silentLogger,
    )
  })
  after(async () => {
    await server?.stop()
  })

  test('a long query searches the first searchMaxTerms words and says so; limit is capped', async () => {
    const c = await client(`${server.url}/mcp`, bob.key)
    try {
      const long = 'read graph entities relations observations nodes memory search open '.repeat(14)
      const result = (await c.callTool({
        name: 'search_tools',
        arguments: { query: long.slice(0, 1000) },
      })) as { content: Json[]; structuredContent: Json }
      assert.match(String(result.structuredContent.note), /first 4 distinct words.*searchMaxTerms/)
      assert.ok((result.structuredContent.tools as Json[]).length > 0)
      const tooMany = await refusal(
        c.callTool({ name: 'search_tools', arguments: { query: 'graph', limit: 6 } }),
      )
      assert.equal(tooMany.code, -32027)
      assert.match(tooMany.message, /at most 5 \(limits\.searchMaxResults\)/)
    } finally {
      await c.close()
    }
  })

  test('each caller has its own rate of search_tools; beyond it, -32029 with a retry-after', async () => {
    // A caller's rate spans its sessions: three calls in two sessions, the fourth refused.
    const first = await client(`${server.url}/mcp`, alice.key)
    const second = await client(`${server.url}/mcp`, alice.key)
    try {
      const names: string[] = []
      for (const c of [first, first, second]) {
        const r = (await c.callTool({
          name: 'search_tools',
          arguments: { query: 'read the whole graph' },
        })) as unknown as { structuredContent: { tools: Json[] } }
        names.push(String(r.structuredContent.tools[0]?.name))
      }
      const refused = await refusal(
        second.callTool({ name: 'search_tools', arguments: { query: 'graph' } }),
      )
      assert.equal(refused.code, -32029)
      assert.match(refused.message, /limits\.metaToolCallsPerMinute/)
      assert.match(JSON.stringify(refused.data), /"retryAfterSeconds":\d+/)
      // call_tool is a direct call, not a meta-tool purchase: it still passes.
      const direct = (await second.callTool({
        name: 'call_tool',
        arguments: { name: names[0], arguments: {} },
      })) as { isError?: boolean }
      assert.notEqual(direct.isError, true)
    } finally {
      await first.close()
      await second.close()
    }
  })

  test('run_code counts against the rate of its virtual server', async () => {
    const c = await client(`${server.url}/mcp/code`, alice.key)
    try {
      for (let i = 0; i < 3; i++) {
        const ran = (await c.callTool({ name: 'run_code', arguments: { code: 'return 1' } })) as {
          isError?: boolean
        }
        assert.notEqual(ran.isError, true, JSON.stringify(ran))
      }
      const refused = await refusal(
        c.callTool({ name: 'run_code', arguments: { code: 'return 1' } }),
      )
      assert.equal(refused.code, -32029)
    } finally {
      await c.close()
    }
  })
})
