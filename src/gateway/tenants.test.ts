import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { normalizeConfig } from '../config/normalize.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import { Gateway } from './gateway.ts'
import { planFromConfig } from './plan.ts'
import { TenantRouter, tenantView } from './tenants.ts'

const config = normalizeConfig({
  upstreams: { main: { url: 'http://127.0.0.1:9/mcp' } },
  auth: {
    apiKeys: { keys: [] },
    permissions: [{ subjects: ['top'] }],
  },
  rateLimits: { all: { limit: 100, windowMs: 1000 } },
  tenants: {
    acme: {
      upstreams: { main: { url: 'http://127.0.0.1:9/acme' } },
      servers: { tools: {} },
      permissions: [{ subjects: ['ann'] }],
    },
    globex: {
      upstreams: { main: { url: 'http://127.0.0.1:9/globex' } },
      rateLimits: { few: { limit: 1, windowMs: 1000 } },
      guards: { arguments: 'enforce' },
      cedar: { policies: ['globex.cedar'] },
    },
  },
})

describe('tenantView', () => {
  test("puts the tenant's upstreams, servers, permissions and quotas in place", () => {
    const [acme, globex] = config.tenants ?? []
    const a = tenantView(config, acme!)
    assert.equal(a.tenants, undefined)
    assert.deepEqual(
      a.servers.map((s) => s.name),
      ['tools'],
    )
    assert.equal((a.upstreams[0] as { url: string }).url, 'http://127.0.0.1:9/acme')
    assert.deepEqual(a.auth?.permissions?.[0]?.subjects, ['ann'])
    assert.equal(a.rateLimits?.[0]?.name, 'all', 'the top-level quotas by default')
    const g = tenantView(config, globex!)
    assert.deepEqual(g.auth?.permissions?.[0]?.subjects, ['top'], 'the top-level rules by default')
    assert.equal(g.rateLimits?.[0]?.name, 'few')
    assert.equal(g.guards?.arguments, 'enforce')
    assert.ok(g.cedar?.policies[0]?.endsWith('/globex.cedar'), 'resolved like the top-level files')
    assert.equal(a.guards, undefined, 'the top-level guards (none) by default')
    assert.equal(a.cedar, undefined)
  })
})

describe('TenantRouter', () => {
  const gatewayOf = (c: typeof config) => new Gateway(planFromConfig(c, silentLogger), silentLogger)
  const main = gatewayOf(config)
  const acme = gatewayOf(tenantView(config, config.tenants![0]!))
  const router = new TenantRouter(main, new Map([['acme', acme]]))
  const who = (tenant?: string) => ({
    subject: 's',
    scopes: [],
    method: 'api-key' as const,
    ...(tenant === undefined ? {} : { tenant }),
  })

  test("answers which servers exist only for the caller's tenant", () => {
    assert.equal(router.hasServer('anything'), true, 'nothing is told before authentication')
    assert.equal(router.serves('default', who()), true)
    assert.equal(router.serves('tools', who()), false)
    assert.equal(router.serves('tools', who('acme')), true)
    assert.equal(router.serves('default', who('acme')), false)
    assert.equal(router.serves('default', who('initech')), false)
    assert.equal(router.gatewayOf(who('acme')), acme)
    assert.equal(router.gatewayOf(undefined), main)
  })

  test('connects a caller to its tenant, and closes a connection of an unknown tenant', async () => {
    const [a] = memoryPair()
    router.connect(a, { kind: 'streamable-http-stateless', server: 'tools', identity: who('acme') })
    assert.equal(acme.sessions.size, 1)
    assert.equal(main.sessions.size, 0)
    const [b] = memoryPair()
    let closed = false
    b.onclose = () => {
      closed = true
    }
    router.connect(b, { kind: 'streamable-http-stateless', server: 'tools', identity: who('x') })
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(closed, true)
    await Promise.all([main.stop(), acme.stop()])
  })
})
