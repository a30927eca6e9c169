import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import { parseExposition, sampleSum } from '../../test/support/prometheus.ts'
import { silentLogger } from '../telemetry/log.ts'
import { Gateway } from './gateway.ts'

describe('gateway metrics', () => {
  test('an upstream that dies and is connected again counts one restart', async () => {
    const servers: McpServer[] = []
    const gateway = new Gateway(
      {
        upstreams: [
          inProcessUpstream('alpha', () => new McpServer({ name: 'a', version: '1' }), servers),
        ],
        servers: [serverPlan('default', ['alpha'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
        metrics: { maxTools: 10 },
      },
      silentLogger,
    )
    const restarts = async () =>
      sampleSum(
        parseExposition((await gateway.metrics?.exposition()) ?? ''),
        'barbican_upstream_restarts_total',
        { upstream: 'alpha' },
      )
    try {
      await gateway.start()
      assert.equal(await restarts(), 0)
      await servers[0]!.close()
      const deadline = Date.now() + 10_000
      while (gateway.upstreams.get('alpha')?.state !== 'ready' || servers.length < 2) {
        assert.ok(Date.now() < deadline, 'the upstream came back')
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      assert.equal(await restarts(), 1)
    } finally {
      await gateway.stop()
    }
  })

  test('without metrics in the plan, nothing is counted', () => {
    const gateway = new Gateway(
      { upstreams: [], servers: [], clientRequestTimeoutMs: 5_000 },
      silentLogger,
    )
    assert.equal(gateway.metrics, undefined)
  })
})
