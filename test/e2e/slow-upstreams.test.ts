/**
 * One slow or dead upstream never stalls the others. Behind one virtual server: server-memory
 * (healthy, from npm), an HTTP server that accepts requests and never answers, a stdio process
 * that prints garbage and never answers initialize, and a stdio server that answers only a few
 * seconds after every start (test/fixtures/upstream-hostile-server.ts). The official SDK client
 * gets its initialize within a second, every list within the listing deadline with the healthy
 * items and the degraded marker, then list_changed when the slow one is ready: at startup and
 * again after that upstream crashed and was restarted.
 */
import assert from 'node:assert/strict'
import { mkdtempSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { DEFAULT_LIMITS } from '../../src/config/defaults.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { DEGRADED_META } from '../../src/relay/local-answers.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const hostile = join(root, 'test/fixtures/upstream-hostile-server.ts')
const memory = join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')

/** The documented defaults this test holds Barbican to. */
const DEADLINE_MS = DEFAULT_LIMITS.listDeadlineMs
/** Scheduling slack on a loaded 2-core machine; far below the 30 s handshake timeout. */
const SLACK_MS = 1_500
/** The slow upstream reads nothing for this long after every start: past the deadline. */
const READY_AFTER_MS = DEADLINE_MS + 1_500

interface Degraded {
  upstream: string
  error: string
}

function degradedOf(result: { _meta?: Record<string, unknown> | undefined }): string[] {
  const marker = result._meta?.[DEGRADED_META] as Degraded[] | undefined
  return (marker ?? []).map((d) => d.upstream).sort()
}

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now()
  const value = await run()
  return { value, ms: Date.now() - started }
}

describe('one slow or dead upstream never stalls the others', () => {
  let hang: Server
  let server: RunningServer
  let client: Client
  /** When each tools/list_changed reached the client. */
  const changes: number[] = []
  /** When the slow upstream became ready, each time. */
  const lateReady: number[] = []

  /** Waits (bounded) until `probe` holds. */
  const until = async (probe: () => boolean, what: string, timeoutMs = READY_AFTER_MS + 10_000) => {
    const deadline = Date.now() + timeoutMs
    while (!probe()) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 25))
    }
  }

  before(async () => {
    // Accepts every connection and request, answers none.
    hang = createServer(() => {})
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve))
    const port = (hang.address() as { port: number }).port
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        memory: {
          command: process.execPath,
          args: [memory],
          env: { MEMORY_FILE_PATH: join(mkdtempSync(join(tmpdir(), 'barbican-slow-')), 'm.jsonl') },
        },
        hang: { url: `http://127.0.0.1:${port}/mcp` },
        garbage: { command: process.execPath, args: [hostile, '--silent'], cwd: root },
        late: {
          command: process.execPath,
          args: [hostile, '--name=late', `--ready-after=${READY_AFTER_MS}`],
          cwd: root,
        },
      },
    })
    const { config } = parseConfigText(text, { cwd: root })
    server = await startServer(config, silentLogger)
    server.gateway.upstreams.get('late')?.on('state', (state: string) => {
      if (state === 'ready') lateReady.push(Date.now())
    })
    client = new Client({ name: 'slow', version: '1.0.0' })
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changes.push(Date.now())
    })
  })
  after(async () => {
    await client?.close()
    await server?.stop()
    hang?.closeAllConnections()
    await new Promise((r) => hang?.close(r))
  })

  test('initialize is answered at once, without waiting on the dead upstream', async () => {
    const { ms } = await timed(() =>
      client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`))),
    )
    // Well under a second on a quiet machine; the bound leaves a loaded 2-core CI machine a
    // second of slack and stays below the 3 s listing deadline that waiting on the dead
    // upstream would cost.
    assert.ok(ms < 2_000 && ms < DEADLINE_MS, `initialize took ${ms} ms`)
  })

  test('every list comes within the deadline, with the healthy items and the degraded marker', async () => {
    const lists = await Promise.all([
      timed(() => client.listTools()),
      timed(() => client.listPrompts()),
      timed(() => client.listResources()),
      timed(() => client.listResourceTemplates()),
    ])
    for (const { ms } of lists) assert.ok(ms < DEADLINE_MS + SLACK_MS, `a list took ${ms} ms`)
    for (const { value } of lists) assert.deepEqual(degradedOf(value), ['garbage', 'hang', 'late'])
    const tools = lists[0].value.tools.map((t) => t.name)
    assert.ok(tools.includes('memory__create_entities'), tools.join())
    assert.ok(tools.every((name) => name.startsWith('memory__')))
    // The degraded catalog is kept: the next list does not wait for the missing ones again.
    const again = await timed(() => client.listTools())
    assert.ok(again.ms < SLACK_MS, `the second list took ${again.ms} ms`)
    assert.deepEqual(degradedOf(again.value), ['garbage', 'hang', 'late'])
  })

  test('list_changed follows when the slow upstream is ready, and it is listed then', async () => {
    await until(() => lateReady.length === 1, 'the slow upstream to be ready')
    const readyAt = lateReady[0]!
    await until(() => changes.some((at) => at >= readyAt), 'list_changed after it was ready')
    const { tools, _meta } = await client.listTools()
    assert.ok(tools.some((t) => t.name === 'late__echo'))
    assert.deepEqual(degradedOf({ _meta }), ['garbage', 'hang'])
    const echo = await client.callTool({ name: 'late__echo', arguments: { text: 'hi' } })
    assert.deepEqual(echo.content, [{ type: 'text', text: 'late:hi' }])
  })

  test('the same holds after the slow upstream crashed and is restarting', async () => {
    await assert.rejects(
      client.callTool({ name: 'late__crash', arguments: {} }),
      /exited with code 3/,
    )
    const listed = await timed(() => client.listTools())
    assert.ok(listed.ms < DEADLINE_MS + SLACK_MS, `tools/list took ${listed.ms} ms`)
    assert.deepEqual(degradedOf(listed.value), ['garbage', 'hang', 'late'])
    assert.ok(listed.value.tools.some((t) => t.name === 'memory__create_entities'))

    await until(() => lateReady.length === 2, 'the restarted upstream to be ready')
    const readyAt = lateReady[1]!
    assert.ok(readyAt > Date.now() - listed.ms - SLACK_MS, 'it was still starting during the list')
    await until(() => changes.some((at) => at >= readyAt), 'list_changed after it was ready again')
    const { tools, _meta } = await client.listTools()
    assert.ok(tools.some((t) => t.name === 'late__echo'))
    assert.deepEqual(degradedOf({ _meta }), ['garbage', 'hang'])
  })
})
