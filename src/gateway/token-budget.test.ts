import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import type { Config } from '../config/config.ts'
import type { Logger } from '../telemetry/log.ts'
import { silentLogger } from '../telemetry/log.ts'
import { Gateway } from './gateway.ts'
import { serverCosts, warnOverBudget } from './token-budget.ts'

function tools(): McpServer {
  const server = new McpServer({ name: 'two', version: '1.0.0' })
  server.registerTool('short', { description: 'Echo.' }, async () => ({ content: [] }))
  server.registerTool('long', { description: 'Echo the text. '.repeat(30) }, async () => ({
    content: [],
  }))
  return server
}

/** Only what the budget reads of a configuration. */
const configWith = (tokenBudget: number | undefined) =>
  ({
    servers: [{ name: 'default', path: '/mcp', upstreams: ['u'], tokenBudget }],
  }) as unknown as Config

function recording(): Logger & { warnings: { message: string; fields: unknown }[] } {
  const warnings: { message: string; fields: unknown }[] = []
  return Object.assign(Object.create(silentLogger) as Logger, {
    warnings,
    warn: (message: string, fields?: unknown) => void warnings.push({ message, fields }),
  })
}

describe('token budgets of virtual servers', () => {
  test('costs each exposed tool, sums them, and warns in the log only over the budget', async () => {
    const gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('u', tools)],
        servers: [serverPlan('default', ['u'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    try {
      await gateway.start()
      const costs = await serverCosts(gateway, configWith(undefined), 'default')
      assert.ok(costs)
      const short = costs.tools.get('short') ?? 0
      const long = costs.tools.get('long') ?? 0
      assert.ok(short > 0 && long > short * 5, `${short} ${long}`)
      assert.equal(costs.total, short + long)
      assert.equal(costs.over, undefined)

      const quiet = recording()
      await warnOverBudget(gateway, configWith(costs.total), quiet)
      assert.deepEqual(quiet.warnings, [])
      const loud = recording()
      await warnOverBudget(gateway, configWith(costs.total - 1), loud)
      assert.equal(loud.warnings.length, 1)
      assert.match(loud.warnings[0]?.message ?? '', /over its tokenBudget of \d+/)
      assert.deepEqual(loud.warnings[0]?.fields, {
        server: 'default',
        tokens: costs.total,
        budget: costs.total - 1,
      })
    } finally {
      await gateway.stop()
    }
  })
})
