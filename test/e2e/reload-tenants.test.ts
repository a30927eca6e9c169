/**
 * A policy reload with tenants (ADR 060, ADR 037 "Amended (policies, live)"): each tenant runs a
 * gateway of its own, and one that inherits a top-level policy section takes the new chain with
 * the main gateway; a tenant's own policy section swaps that tenant's chain only; a reload whose
 * chain does not build changes no gateway's chain; any other tenant change needs a restart.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import type { Identity } from '../../src/auth/identity.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import type { Call, Reply } from '../../src/policies/policy.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { callOf, countingRelay } from '../support/calls.ts'

const dir = mkdtempSync(join(tmpdir(), 'barbican-reload-tenants-'))
const cedar = join(dir, 'team.cedar')
const forbidAll = join(dir, 'acme-forbid.cedar')
const lazy = { command: process.execPath, args: ['-e', ''], lazy: true }

function configWith(extra: Record<string, unknown>, acme: Record<string, unknown> = {}) {
  return normalizeConfig({
    listen: '127.0.0.1:0',
    store: { memory: {} },
    audit: { enabled: false },
    upstreams: { main: lazy },
    auth: { apiKeys: { keys: [] } },
    tenants: {
      // acme sets its own guards; globex inherits every top-level policy section.
      acme: { upstreams: { main: lazy }, guards: { arguments: 'enforce' }, ...acme },
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

  /** Runs a tool call from `tenant` through that tenant's running chain. */
  const callAs = (tenant: string): Promise<Reply> => {
    const chain = server.gatewayOf(of(tenant))?.policies ?? []
    const { relay } = countingRelay()
    const run = chain.reduceRight<(c: Call) => Promise<Reply>>(
      (next, policy) => (c) => policy.handle(c, next),
      relay,
    )
    return run(callOf('tools/call', { name: 'echo', arguments: {} }, { identity: of(tenant) }))
  }
  const running = {
    rateLimits: { all: { limit: 5, windowMs: 1000 } },
    cedar: { policies: [cedar] },
  }

  test("a tenant's own Cedar forbid refuses that tenant's next call; no other chain is swapped", async () => {
    writeFileSync(cedar, 'permit (principal, action, resource);\n')
    writeFileSync(forbidAll, 'forbid (principal, action, resource);\n')
    await callAs('acme')
    const untouched = [server.gateway.policies, server.gatewayOf(of('globex'))?.policies]
    const diff = await server.apply(configWith(running, { cedar: { policies: [forbidAll] } }))
    assert.deepEqual(diff.policies, ['tenants.acme.cedar'])
    assert.deepEqual(diff.needsRestart, [])
    await assert.rejects(callAs('acme'), /Cedar policy/)
    await callAs('globex')
    assert.equal(server.gateway.policies, untouched[0])
    assert.equal(server.gatewayOf(of('globex'))?.policies, untouched[1])
    assert.deepEqual(server.config.tenants?.[0]?.cedar?.policies, [forbidAll])
  })

  test('any other change to a tenant still needs a restart, its policies included', async () => {
    const acme = server.gatewayOf(of('acme'))?.policies
    const diff = await server.apply(
      configWith(running, { upstreams: { main: { ...lazy, args: ['-e', '1'] } } }),
    )
    assert.deepEqual(diff.needsRestart, ['tenants'])
    assert.deepEqual(diff.policies, [])
    assert.equal(server.gatewayOf(of('acme'))?.policies, acme)
    assert.deepEqual(server.config.tenants?.[0]?.cedar?.policies, [forbidAll], 'tenants are kept')
    await assert.rejects(callAs('acme'), /Cedar policy/)
  })
})
