import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { silentLogger } from '../telemetry/log.ts'
import type { UpstreamReply } from './upstream-client.ts'
import { fetchAllPages, type ListSource } from './upstream-lists.ts'

/** A source answering from `pages` by cursor ('' for the first page). */
function source(
  pages: Record<string, JsonObject>,
  modern = false,
): ListSource & { asked: unknown[] } {
  const asked: unknown[] = []
  return {
    name: 'up',
    log: silentLogger,
    asked,
    isModern: () => modern,
    toolSchemas: new Map(),
    async request(_method, params): Promise<UpstreamReply> {
      const cursor = typeof params?.cursor === 'string' ? params.cursor : ''
      asked.push(params?.cursor)
      const result = pages[cursor]
      if (!result) return { kind: 'error', id: 1, code: -32602, message: 'bad cursor' }
      return { kind: 'result', id: 1, resultType: 'complete', result }
    },
  }
}

test('every page is fetched, following the cursors until there is none', async () => {
  const s = source({
    '': { prompts: [{ name: 'a' }], nextCursor: 'p2' },
    p2: { prompts: [{ name: 'b' }, 'not an object'], nextCursor: '' },
  })
  assert.deepEqual(await fetchAllPages(s, 'prompts'), [{ name: 'a' }, { name: 'b' }])
  assert.deepEqual(s.asked, [undefined, 'p2'])
})

test('an upstream that loops its cursors is given up on with a protocol error', async () => {
  const s = source({
    '': { tools: [], nextCursor: 'again' },
    again: { tools: [], nextCursor: 'again' },
  })
  await assert.rejects(
    fetchAllPages(s, 'tools'),
    (e) => e instanceof BarbicanError && e.code === 'ERR_UPSTREAM_PROTOCOL',
  )
})

test('a 2026-07-28 tool with invalid x-mcp-header annotations is left out; schemas are remembered', async () => {
  const good = {
    type: 'object',
    properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
  }
  const bad = { type: 'object', properties: { blob: { type: 'object', 'x-mcp-header': 'Blob' } } }
  const s = source(
    {
      '': {
        tools: [
          { name: 'ok', inputSchema: good },
          { name: 'no', inputSchema: bad },
        ],
      },
    },
    true,
  )
  const tools = await fetchAllPages(s, 'tools')
  assert.deepEqual(
    tools.map((t) => t.name),
    ['ok'],
  )
  assert.deepEqual(s.toolSchemas.get('ok'), good)
  assert.equal(s.toolSchemas.has('no'), false)
})
