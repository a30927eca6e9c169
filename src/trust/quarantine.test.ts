import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import { Gateway } from '../gateway/gateway.ts'
import { memoryStore } from '../store/memory.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import { approveChange } from './decisions.ts'
import { DEFAULT_TRUST_POLICY } from './policy.ts'
import { TrustGuard } from './trust-guard.ts'

/** One upstream offering a tool and a prompt both named `dup`, every new item held for approval. */
async function start() {
  const store = memoryStore()
  const trust = new TrustGuard({
    store: store.pins,
    log: silentLogger,
    policies: new Map([['twin', { ...DEFAULT_TRUST_POLICY, firstSight: 'approve' as const }]]),
  })
  const build = () => {
    const server = new McpServer({ name: 'twin', version: '1.0.0' })
    server.registerTool('dup', { description: 'A tool.' }, async () => ({
      content: [{ type: 'text', text: 'tool dup' }],
    }))
    server.registerPrompt('dup', { description: 'A prompt.' }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'prompt dup' } }],
    }))
    return server
  }
  const gateway = new Gateway(
    {
      upstreams: [inProcessUpstream('twin', build)],
      servers: [serverPlan('default', ['twin'], rules('never'))],
      clientRequestTimeoutMs: 5_000,
      trust,
    },
    silentLogger,
  )
  await gateway.start()
  const [clientSide, gatewaySide] = memoryPair()
  gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
  await gatewaySide.start()
  const client = new Client({ name: 'quarantine-test', version: '1.0.0' })
  await client.connect(clientSide as never)
  return {
    client,
    /** Lists once (the review records what is new), then approves `key`. */
    async approve(key: string) {
      assert.deepEqual((await client.listTools()).tools, [], 'everything new waits for approval')
      await approveChange(store.pins, 'twin', key, 'alice')
    },
    async close() {
      await client.close()
      await gateway.stop()
      await store.close()
    },
  }
}

describe('quarantine per kind', () => {
  test('a quarantined tool "dup" leaves the approved prompt "dup" usable', async () => {
    const f = await start()
    try {
      await f.approve('prompt:dup')
      const prompt = await f.client.getPrompt({ name: 'dup' })
      assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: 'prompt dup' })
      assert.deepEqual(
        (await f.client.listPrompts()).prompts.map((p) => p.name),
        ['dup'],
      )
      await assert.rejects(f.client.callTool({ name: 'dup', arguments: {} }), /quarantined/)
      assert.deepEqual((await f.client.listTools()).tools, [])
    } finally {
      await f.close()
    }
  })

  test('a quarantined prompt "dup" leaves the approved tool "dup" callable', async () => {
    const f = await start()
    try {
      await f.approve('tool:dup')
      const result = await f.client.callTool({ name: 'dup', arguments: {} })
      assert.deepEqual(result.content, [{ type: 'text', text: 'tool dup' }])
      await assert.rejects(f.client.getPrompt({ name: 'dup' }), /quarantined/)
      await assert.rejects(
        f.client.complete({
          ref: { type: 'ref/prompt', name: 'dup' },
          argument: { name: 'x', value: '' },
        }),
        /quarantined/,
      )
    } finally {
      await f.close()
    }
  })
})
