import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import type { StdioUpstreamConfig } from './config.ts'
import { ConfigError, formatKeyPath } from './config-error.ts'
import { normalizeConfig } from './normalize.ts'

function problems(input: unknown): string[] {
  try {
    normalizeConfig(input)
  } catch (err) {
    assert.ok(err instanceof ConfigError)
    return err.issues.map((issue) => `${formatKeyPath(issue.path)}: ${issue.message}`)
  }
  assert.fail('expected a ConfigError')
}

const server = (name: string) => ({ command: 'node', args: [`${name}.js`] })

describe('tenants:', () => {
  test('is absent from a single-tenant configuration', () => {
    const config = normalizeConfig({ upstreams: { main: server('main') } })
    assert.equal(config.tenants, undefined)
  })

  test('builds each tenant like the top level, with the same names allowed', () => {
    const config = normalizeConfig(
      {
        upstreams: { main: server('top') },
        tenants: {
          acme: { upstreams: { main: server('acme'), extra: server('extra') } },
          globex: {
            upstreams: { main: server('globex') },
            servers: { tools: { upstreams: ['main'] } },
            permissions: [{ subjects: ['ann'], tools: ['read_*'] }],
            rateLimits: { calls: { limit: 5, windowMs: 1000 } },
          },
        },
      },
      { baseDir: '/srv/gw' },
    )
    const [acme, globex] = config.tenants ?? []
    assert.equal(acme?.name, 'acme')
    assert.deepEqual(
      acme?.upstreams.map((u) => u.name),
      ['main', 'extra'],
    )
    // The default server over all the tenant's upstreams, namespaced as at the top level.
    assert.deepEqual(acme?.servers[0]?.upstreams, ['main', 'extra'])
    assert.equal(acme?.servers[0]?.namespacing.mode, 'always')
    assert.equal(acme?.permissions, undefined)
    assert.deepEqual(
      globex?.servers.map((s) => [s.name, s.path]),
      [['tools', '/mcp/tools']],
    )
    assert.deepEqual(globex?.permissions?.[0]?.subjects, ['ann'])
    assert.equal(globex?.rateLimits?.[0]?.name, 'calls')
    assert.equal(globex?.rateLimits?.[0]?.limit, 5)
    assert.equal(acme?.rateLimits, undefined)
    // A confined server of a tenant keeps its state apart from the top level's namesake.
    const top = config.upstreams[0] as StdioUpstreamConfig
    const theirs = acme?.upstreams[0] as StdioUpstreamConfig
    assert.ok(top.sandbox !== 'none' && theirs.sandbox !== 'none')
    assert.notEqual(top.sandbox.stateDir, theirs.sandbox.stateDir)
    assert.ok(
      theirs.sandbox.stateDir.startsWith(join('/srv/gw', '.barbican')),
      theirs.sandbox.stateDir,
    )
    assert.ok(theirs.sandbox.stateDir.includes(join('.tenants', 'acme')))
  })

  test("checks a tenant's references with its own upstreams, under its path", () => {
    assert.deepEqual(
      problems({
        upstreams: { main: server('top') },
        tenants: {
          acme: {
            upstreams: { own: server('own') },
            servers: { default: { upstreams: ['main'] } },
          },
        },
      }),
      [
        'tenants.acme.servers.default.upstreams[0]: server "default" names upstream "main", which is not defined (defined upstreams: own)',
      ],
    )
  })

  test('reserves the name "default" and refuses unknown keys', () => {
    const lines = problems({
      upstreams: { main: server('top') },
      tenants: {
        default: { upstreams: { main: server('x') } },
        acme: { upstreams: { main: server('y') }, quota: 3 },
      },
    })
    assert.ok(
      lines.some((l) => l.startsWith('tenants.default: is reserved')),
      lines.join('\n'),
    )
    assert.ok(
      lines.some((l) => l.startsWith('tenants.acme')),
      lines.join('\n'),
    )
  })
})
