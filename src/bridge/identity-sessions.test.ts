/**
 * Per-identity legacy upstream sessions (`sessionScope: 'identity'`): Barbican runs the
 * handshake once per caller identity, so each user's calls reach the upstream on their own
 * session; anonymous callers and Barbican's own list requests share one.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import type { Identity } from '../auth/identity.ts'
import { parseConfigText } from '../config/load.ts'
import { Gateway } from '../gateway/gateway.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'

/** Each upstream instance (one per session) answers `whoami` with its own number. */
function numbered(): () => McpServer {
  let next = 0
  return () => {
    const n = ++next
    const server = new McpServer({ name: 'numbered', version: '1.0.0' })
    server.registerTool('whoami', { description: 'session number' }, async () => ({
      content: [{ type: 'text', text: String(n) }],
    }))
    return server
  }
}

const user = (subject: string): Identity => ({ subject, scopes: [], method: 'jwt' })

describe('per-identity legacy upstream sessions', () => {
  let gateway: Gateway
  const clients: Client[] = []
  before(async () => {
    const upstream = { ...inProcessUpstream('up', numbered()), sessionScope: 'identity' as const }
    gateway = new Gateway(
      {
        upstreams: [upstream],
        servers: [serverPlan('default', ['up'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    await gateway.start()
  })
  after(async () => {
    for (const c of clients) await c.close()
    await gateway.stop()
  })

  async function whoami(identity?: Identity): Promise<string> {
    const [clientSide, gatewaySide] = memoryPair()
    gateway.connect(gatewaySide, { kind: 'stdio', server: 'default', identity })
    await gatewaySide.start()
    const client = new Client({ name: 't', version: '1' })
    clients.push(client)
    await client.connect(clientSide as never)
    const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
      content: { text: string }[]
    }
    return result.content[0]?.text ?? ''
  }

  test('each identity gets its own session, reused across its connections', async () => {
    const alice = await whoami(user('alice'))
    const bob = await whoami(user('bob'))
    const aliceAgain = await whoami(user('alice'))
    const anonymous = await whoami()
    assert.notEqual(alice, bob)
    assert.equal(aliceAgain, alice)
    assert.equal(anonymous, '1', 'anonymous callers use the shared session opened at start')
    assert.notEqual(alice, '1')
  })
})

describe('configuring per-identity sessions', () => {
  test('`sessions: per-identity` on an upstream asks for identity-scoped sessions', () => {
    const { config } = parseConfigText(
      'upstreams:\n  a: { command: node, sessions: per-identity }\n  b: { command: node }\n',
    )
    const plan = planFromConfig(config, silentLogger)
    assert.deepEqual(
      plan.upstreams.map((u) => [u.name, u.sessionScope]),
      [
        ['a', 'identity'],
        ['b', undefined],
      ],
    )
  })
})
