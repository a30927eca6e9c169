import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { normalizeConfig } from '../config/normalize.ts'
import { diffConfigs, isEmptyDiff } from './reload.ts'

const stdio = (command: string) => ({ command, args: [] })

describe('diffConfigs', () => {
  const running = normalizeConfig({
    upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
    servers: { default: {}, ops: { upstreams: ['a'] } },
  })

  test('finds nothing between equal configurations', () => {
    const same = normalizeConfig({
      upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
      servers: { default: {}, ops: { upstreams: ['a'] } },
    })
    assert.ok(isEmptyDiff(diffConfigs(running, same)))
  })

  test('names added, removed and changed upstreams and the servers they change', () => {
    const next = normalizeConfig({
      upstreams: { a: stdio('a'), b: stdio('b2'), d: stdio('d') },
      servers: { default: {}, ops: { upstreams: ['a'], tools: { exclude: ['x*'] } } },
    })
    const diff = diffConfigs(running, next)
    assert.deepEqual(diff.upstreams, { added: ['d'], removed: ['c'], changed: ['b'] })
    // default lists every upstream, so its members changed; ops changed its filter.
    assert.deepEqual(diff.servers, ['default', 'ops'])
    assert.deepEqual(diff.needsRestart, [])
  })

  test('reports what only a restart applies: listen, limits, auth, new or moved servers', () => {
    const next = normalizeConfig({
      listen: '127.0.0.1:7411',
      limits: { maxBodyBytes: 1234 },
      upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
      servers: { default: {}, extra: { upstreams: ['b'] } },
    })
    const diff = diffConfigs(running, next)
    assert.deepEqual(diff.needsRestart, [
      'listen',
      'limits',
      'servers.extra (added)',
      'servers.ops (removed)',
    ])
    assert.deepEqual(diff.servers, [])
  })

  test('reports changed policies as needing a restart: the running chain keeps its own', () => {
    const next = normalizeConfig({
      upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
      servers: { default: {}, ops: { upstreams: ['a'] } },
      rateLimits: { few: { limit: 1, windowMs: 1000 } },
      guards: { arguments: 'enforce' },
    })
    assert.deepEqual(diffConfigs(running, next).needsRestart, ['rateLimits', 'guards'])
  })
})
