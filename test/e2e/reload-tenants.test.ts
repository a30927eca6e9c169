/**
 * A policy reload with tenants (ADR 060, ADR 037 "Amended (policies, live)"): each tenant runs a
 * gateway of its own, and one that inherits a top-level policy section takes the new chain with
 * the main gateway; a reload whose chain does not build changes no gateway's chain.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Identity } from '../../src/auth/identity.ts'
import { type RunningServer, startServer } from '../../src/cli/serve.ts'
import { silentLogger } from '../../src/common/log.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'

const dir = mkdtempSync(join(tmpdir(), 'barbican-reload-tenants-'))
const cedar = join(dir, 'team.cedar')
const lazy = { command: process.execPath, args: ['-e', ''], lazy: true }

function configWith(extra: Record<string, unknown>) {
  return normalizeConfig({
    listen: '127.0.0.1:0',
    store: { memory: {} },
    audit: { enabled: false },
    upstreams: { main: lazy },
    auth: { apiKeys: { keys: [] } },
    tenants: {
      // acme sets its own guards; globex inherits every top-level policy section.
      acme: { upstreams: { main: lazy }, guards: { arguments: 'enforce' } },
      globex: { upstreams: { main: lazy } },
    },
    ...extra,
  })
}

const of = (tenant: string): Identity => ({ subject: 's', tenant, scopes: [], method: 'api-key' })

describe('a policy reload with tenants', () => {
  let server: RunningServer

  before(async () => {
    writeFileSync(cedar, 'permit (principal, action, resource);\n')
    server = await startServer(configWith({}), silentLogger)
  })
  after(async () => {
    await server?.stop()
  })

  const names = (tenant: string) =>
    (server.gatewayOf(of(tenant))?.policies ?? []).map((p) => p.name).join(',')

  test('a top-level section reaches the main gateway and every tenant that inherits it', async () => {
    assert.equal(names('globex'), '')
    assert.equal(names('acme'), 'guards')
    const diff = await server.apply(
      configWith({
        rateLimits: { all: { limit: 5, windowMs: 1000 } },
        cedar: { policies: [cedar] },
      }),
    )
    assert.deepEqual(diff.policies, ['rateLimits', 'cedar'])
    assert.equal(server.gateway.policies.map((p) => p.name).join(','), 'rate-limit,cedar')
    assert.equal(names('globex'), 'rate-limit,cedar')
    assert.equal(names('acme'), 'rate-limit,cedar,guards')
  })

  test('a chain that does not build refuses the reload: no gateway takes a new chain', async () => {
    const before = [
      server.gateway.policies,
      ...['acme', 'globex'].map((t) => server.gatewayOf(of(t))?.policies),
    ]
    writeFileSync(cedar, 'permit (principal, action == Barbican::Action::"fly", resource);\n')
    await assert.rejects(
      server.apply(
        configWith({
          rateLimits: { all: { limit: 1, windowMs: 1000 } },
          cedar: { policies: [cedar] },
        }),
      ),
      /Cedar/,
    )
    const now = [
      server.gateway.policies,
      ...['acme', 'globex'].map((t) => server.gatewayOf(of(t))?.policies),
    ]
    for (let i = 0; i < now.length; i++) assert.equal(now[i], before[i])
    assert.equal(server.config.rateLimits?.[0]?.limit, 5, 'the running configuration is kept')
  })
})
