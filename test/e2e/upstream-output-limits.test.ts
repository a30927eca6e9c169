/**
 * What a server sends back is bounded (issue 16 point 5, docs/sandbox.md "Limits on what a
 * server sends back"): a server that floods one call with progress notifications is stopped at
 * `limits.upstreamMaxCallOutputBytes`: the call fails with ERR_UPSTREAM_OUTPUT_LIMIT (-32013)
 * naming the limit and its key, the server is told to cancel it, and the upstream keeps serving.
 * A single reply beyond `limits.maxMessageBytes` fails its call the same way it always did.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const flood = join(root, 'test/fixtures/upstream-flood-server.ts')

describe('a server that floods one call', () => {
  let server: RunningServer
  let client: Client

  before(async () => {
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      limits: { upstreamMaxCallOutputBytes: 64 * 1024 },
      upstreams: { flood: { command: process.execPath, args: [flood] } },
    })
    const { config } = parseConfigText(text, {})
    server = await startServer(config, silentLogger)
    await server.started
    client = new Client({ name: 'flood-test', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })

  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('is stopped at upstreamMaxCallOutputBytes, with an error naming the limit', async () => {
    let progress = 0
    const error = await client
      .callTool({ name: 'flood', arguments: { count: 2000, size: 1024 } }, undefined, {
        onprogress: () => {
          progress++
        },
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      )
    assert.ok(error instanceof McpError, String(error))
    assert.equal(error.code, -32013)
    assert.match(error.message, /past limits\.upstreamMaxCallOutputBytes \(65536\)/)
    // At most 64 notifications of over 1 KiB fit in 64 KiB: none is relayed past the bound.
    assert.ok(progress > 0 && progress < 64, `${progress} progress notifications relayed`)
  })

  test('tells the server to cancel the call, and goes on serving', async () => {
    const deadline = Date.now() + 5000
    let cancelled: unknown[] = []
    while (cancelled.length === 0) {
      assert.ok(Date.now() < deadline, 'the server was not told to cancel')
      cancelled = JSON.parse(textOf(await client.callTool({ name: 'cancelled' }))) as unknown[]
    }
    assert.equal(cancelled.length, 1)
    assert.equal(textOf(await client.callTool({ name: 'small' })), 'ok')
  })

  test('a call within the bound is untouched', async () => {
    let progress = 0
    const result = await client.callTool(
      { name: 'flood', arguments: { count: 20, size: 1024 } },
      undefined,
      {
        onprogress: () => {
          progress++
        },
      },
    )
    assert.equal(textOf(result), 'flooded 20 x 1024')
    assert.equal(progress, 20)
  })
})
