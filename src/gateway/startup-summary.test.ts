import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import { silentLogger } from '../telemetry/log.ts'
import { Gateway, heldStatus } from './gateway.ts'
import { startupSummary } from './startup-summary.ts'

function twoTools(): McpServer {
  const server = new McpServer({ name: 'two', version: '1.0.0' })
  for (const name of ['a', 'b']) {
    server.registerTool(name, { description: name }, async () => ({ content: [] }))
  }
  return server
}

describe('the start-up summary', () => {
  test('counts ready upstreams and the tools a client sees, and names a failed upstream', async () => {
    const broken = {
      ...inProcessUpstream('broken', twoTools),
      connectTimeoutMs: 200,
      createTransport: () => {
        throw new Error('spawn nothing ENOENT')
      },
    }
    const gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('good', twoTools), broken],
        servers: [
          serverPlan('default', ['good', 'broken'], rules('always', { filter: (n) => n !== 'b' })),
        ],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    try {
      await gateway.start()
      const summary = await startupSummary(gateway, 'default', 'http://127.0.0.1:7300/mcp', 2_000)
      assert.equal(
        summary.message,
        'ready: 1/2 upstreams, 1 tool at http://127.0.0.1:7300/mcp (broken: failed — see above)',
      )
      assert.equal(summary.degraded, true)
      assert.deepEqual(summary.fields.failed, ['broken'])
    } finally {
      await gateway.stop()
    }
  })

  test('counts an entry a missing variable holds back, and names it as held (ADR 121)', async () => {
    const gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('good', twoTools)],
        servers: [serverPlan('default', ['good'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    try {
      await gateway.start()
      const held = heldStatus([
        { name: 'web', reason: 'upstreams.web.url needs environment variable URL' },
      ])
      const summary = await startupSummary(gateway, 'default', 'http://h/mcp', 2_000, held)
      assert.equal(
        summary.message,
        'ready: 1/2 upstreams, 2 tools at http://h/mcp (web: held — see above)',
      )
      assert.equal(summary.degraded, true)
      assert.deepEqual(summary.fields.failed, ['web'])
    } finally {
      await gateway.stop()
    }
  })

  test('does not start a lazy upstream to count its tools', async () => {
    const lazy = { ...inProcessUpstream('lazy', twoTools), lazy: true }
    const gateway = new Gateway(
      {
        upstreams: [lazy],
        servers: [serverPlan('default', ['lazy'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    try {
      await gateway.start()
      const summary = await startupSummary(gateway, 'default', 'http://h/mcp', 2_000)
      assert.equal(
        summary.message,
        'ready: 1/1 upstreams, tools listed on first use at http://h/mcp',
      )
      assert.equal(gateway.upstreams.get('lazy')?.state, 'idle')
    } finally {
      await gateway.stop()
    }
  })
})
