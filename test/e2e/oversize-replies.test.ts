/**
 * Replies beyond the message limits, sent the way an attacker would (test/fixtures/
 * upstream-hostile-server.ts): a 30 MiB single-line answer to one call, and a tools/list of
 * 100k tools in one line. The call fails at once with an error naming the limit, the upstream
 * keeps serving, and a degraded catalogue is retried in the background, never on a client's
 * list path. The timing bounds are generous for a loaded 2-core machine but far below the
 * upstream request timeout a client used to wait for.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { DEGRADED_META } from '../../src/relay/local-answers.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const hostile = join(root, 'test/fixtures/upstream-hostile-server.ts')
const memory = join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')

/** Far below the upstream request timeout (60 s) that a lost reply used to cost. */
const FAST_MS = 10_000
/** What the SDK client waits at most, so a regression fails instead of hanging. */
const CLIENT_TIMEOUT = { timeout: 30_000 }

function textOf(result: unknown): string {
  return (result as { content: { text?: string }[] }).content.map((c) => c.text ?? '').join('')
}

async function gatewayWith(upstreams: Record<string, unknown>) {
  const { config } = parseConfigText(JSON.stringify({ listen: '127.0.0.1:0', upstreams }), {
    cwd: root,
  })
  const server = await startServer(config, silentLogger)
  await server.started
  const client = new Client({ name: 'oversize', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  return { server, client }
}

describe('an upstream answering one call with a 30 MiB line', () => {
  let server: RunningServer
  let client: Client
  before(async () => {
    ;({ server, client } = await gatewayWith({
      memory: { command: process.execPath, args: [memory] },
      big: { command: process.execPath, args: [hostile, '--name=big'], cwd: root },
    }))
  })
  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('fails that call at once, naming the limit, and the next call succeeds', async () => {
    const started = Date.now()
    await assert.rejects(
      client.callTool({ name: 'big__flood', arguments: {} }, undefined, CLIENT_TIMEOUT),
      (err: Error) => {
        assert.match(err.message, /maxMessageBytes/)
        assert.match(err.message, /4194304/)
        return true
      },
    )
    const failedIn = Date.now() - started
    assert.ok(failedIn < FAST_MS, `the oversized reply took ${failedIn} ms to fail`)

    const next = Date.now()
    const echo = await client.callTool(
      { name: 'big__echo', arguments: { text: 'still here' } },
      undefined,
      CLIENT_TIMEOUT,
    )
    assert.equal(textOf(echo), 'big:still here')
    assert.ok(Date.now() - next < FAST_MS, 'the call after the oversized reply was slow')
    assert.equal(server.gateway.upstreams.get('big')?.state, 'ready', 'the upstream kept running')
  })
})

describe('an upstream listing 100k tools in one reply', () => {
  let server: RunningServer
  let client: Client
  before(async () => {
    ;({ server, client } = await gatewayWith({
      memory: { command: process.execPath, args: [memory] },
      many: {
        command: process.execPath,
        args: [hostile, '--name=many', '--tools=100000'],
        cwd: root,
      },
    }))
  })
  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('is left out of the catalogue at once, with the reason in the degraded marker', async () => {
    const started = Date.now()
    const listed = await client.listTools(undefined, CLIENT_TIMEOUT)
    const took = Date.now() - started
    assert.ok(took < FAST_MS, `tools/list took ${took} ms`)
    assert.ok(listed.tools.length > 0)
    assert.ok(listed.tools.every((t) => t.name.startsWith('memory__')))
    const degraded = listed._meta?.[DEGRADED_META] as { upstream: string; error: string }[]
    assert.deepEqual(
      degraded.map((d) => d.upstream),
      ['many'],
    )
    assert.match(degraded[0]!.error, /maxMessageBytes/)
  })

  test('later lists are answered from the catalogue, not by fetching the 100k tools again', async () => {
    for (let i = 0; i < 5; i++) {
      const started = Date.now()
      const listed = await client.listTools(undefined, CLIENT_TIMEOUT)
      const took = Date.now() - started
      assert.ok(took < 1_000, `tools/list #${i + 2} took ${took} ms`)
      assert.ok(listed.tools.every((t) => t.name.startsWith('memory__')))
    }
  })
})
