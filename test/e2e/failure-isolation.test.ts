/**
 * One upstream that crashes or writes garbage never breaks the gateway or the other upstreams:
 * the caller of a crashing call gets an error, the upstream is restarted, and the next call works.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const faulty = join(root, 'test/fixtures/upstream-faulty-server.ts')

describe('failure isolation between upstreams', () => {
  let server: RunningServer
  let client: Client
  before(async () => {
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        crashy: { command: process.execPath, args: [faulty], cwd: root },
        noisy: { command: process.execPath, args: [faulty, '--garbage'], cwd: root },
      },
    })
    const { config } = parseConfigText(text, { cwd: root })
    server = await startServer(config, silentLogger)
    client = new Client({ name: 'isolation', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })
  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('an upstream writing garbage on stdout still serves its calls', async () => {
    const result = await client.callTool({ name: 'noisy__echo', arguments: { text: 'x' } })
    assert.match(textOf(result), /^faulty:x:[0-9a-f-]{36}$/)
  })

  test('a crash mid-call fails that call, and the restarted upstream serves the next one', async () => {
    const before = textOf(await client.callTool({ name: 'crashy__echo', arguments: { text: 'a' } }))
    const pidBefore = before.split(':')[2]
    await assert.rejects(
      client.callTool({ name: 'crashy__crash', arguments: {} }),
      /exited with code 3/,
    )
    // An eager upstream is restarted in the background, before anyone calls it again.
    const crashy = server.gateway.upstreams.get('crashy')!
    const deadline = Date.now() + 10_000
    while (crashy.state !== 'ready') {
      assert.ok(Date.now() < deadline, `crashy is ${crashy.state}`)
      await new Promise((r) => setTimeout(r, 20))
    }
    const after = textOf(await client.callTool({ name: 'crashy__echo', arguments: { text: 'b' } }))
    assert.match(after, /^faulty:b:[0-9a-f-]{36}$/)
    assert.notEqual(after.split(':')[2], pidBefore, 'the upstream process was restarted')
    // The other upstream was never disturbed.
    assert.match(
      textOf(await client.callTool({ name: 'noisy__echo', arguments: { text: 'y' } })),
      /^faulty:y:/,
    )
  })
})

describe('an upstream that cannot start', () => {
  let server: RunningServer
  let client: Client
  const logs: unknown[] = []
  before(async () => {
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        ghost: { command: '/nonexistent/mcp-server' },
        good: { command: process.execPath, args: [faulty], cwd: root },
      },
    })
    const { config } = parseConfigText(text, { cwd: root })
    server = await startServer(config, silentLogger)
    client = new Client({ name: 'degraded', version: '1.0.0' })
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params.data)
    })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })
  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('lists degrade to the other upstreams and the client is told which one is missing', async () => {
    const { tools } = await client.listTools()
    assert.ok(tools.length > 0)
    assert.ok(tools.every((t) => t.name.startsWith('good__')))
    const deadline = Date.now() + 5_000
    while (!logs.some((l) => JSON.stringify(l).includes('ghost'))) {
      assert.ok(Date.now() < deadline, 'no logging notification about the missing upstream')
      await new Promise((r) => setTimeout(r, 10))
    }
  })

  test('readiness reports the missing upstream with its error', async () => {
    const res = await fetch(`${server.url}/readyz`)
    assert.equal(res.status, 503)
    const body = (await res.json()) as {
      upstreams: { name: string; state: string; error?: string }[]
    }
    const ghost = body.upstreams.find((u) => u.name === 'ghost')
    assert.equal(ghost?.state, 'failed')
    assert.ok(ghost?.error)
    assert.equal(body.upstreams.find((u) => u.name === 'good')?.state, 'ready')
  })
})
