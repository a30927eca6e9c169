/**
 * Permissions from the configuration decide, per identity, which tools a caller sees and may call.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

describe('auth.permissions', () => {
  let upstream: RecordingUpstream
  let server: RunningServer
  const alice = generateApiKey()
  const bob = generateApiKey()

  before(async () => {
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      auth: {
        apiKeys: {
          keys: [
            { id: 'a', hash: alice.hash, subject: 'alice', scopes: ['tools'] },
            { id: 'b', hash: bob.hash, subject: 'bob' },
          ],
        },
        permissions: [
          { scopes: ['tools'], servers: ['*'], tools: ['who*'] },
          { subjects: ['bob'], servers: ['default'], tools: ['nothing-here'] },
        ],
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
  })

  async function as(key: string, body: (client: Client) => Promise<void>) {
    const client = new Client({ name: 'perm', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}` } },
      }),
    )
    try {
      await body(client)
    } finally {
      await client.close()
    }
  }

  test('a permitted caller sees and calls the tool', async () => {
    await as(alice.key, async (client) => {
      const { tools } = await client.listTools()
      assert.deepEqual(
        tools.map((t) => t.name),
        ['whoami'],
      )
      await client.callTool({ name: 'whoami', arguments: {} })
    })
  })

  test('a caller without a matching rule sees no tool and is refused before the upstream', async () => {
    const before = upstream.requests.length
    await as(bob.key, async (client) => {
      const { tools } = await client.listTools()
      assert.deepEqual(tools, [])
      await assert.rejects(client.callTool({ name: 'whoami', arguments: {} }), /may not call/)
    })
    const calls = upstream.requests
      .slice(before)
      .filter((r) => (r.body as { method?: string })?.method === 'tools/call')
    assert.equal(calls.length, 0)
  })
})
