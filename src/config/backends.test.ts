import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError } from './config-error.ts'
import { parseConfigText } from './load.ts'

const BASE = 'upstreams:\n  a: { command: node }\n'
const parse = (text: string, env: Record<string, string> = {}) =>
  parseConfigText(text, { file: '/etc/barbican/barbican.yaml', env })

function issuesOf(run: () => unknown): string[] {
  try {
    run()
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err))
    return err.issues.map((i) => `${i.path.join('.')}: ${i.message}`)
  }
  assert.fail('expected a ConfigError')
}

describe('PostgreSQL and Redis configuration', () => {
  test('the file names both backends; migrate and prefix have defaults', () => {
    const { config } = parse(
      `${BASE}store:\n  postgres: { url: "postgres://db.internal/barbican" }\nredis: { url: "redis://cache:6379" }\n`,
    )
    assert.deepEqual(config.store, {
      kind: 'postgres',
      url: 'postgres://db.internal/barbican',
      migrate: true,
    })
    assert.deepEqual(config.redis, {
      url: 'redis://cache:6379',
      prefix: 'barbican:',
      quotaLeaseMs: 200,
    })
  })

  test('the environment wins over the file and keeps its migrate and prefix', () => {
    const { config } = parse(
      `${BASE}store:\n  postgres: { url: "postgres://file/db", migrate: false }\nredis: { url: "redis://file", prefix: "gw1:" }\n`,
      { BARBICAN_POSTGRES_URL: 'postgresql://env/db', BARBICAN_REDIS_URL: 'rediss://env:6380' },
    )
    assert.deepEqual(config.store, { kind: 'postgres', url: 'postgresql://env/db', migrate: false })
    assert.deepEqual(config.redis, {
      url: 'rediss://env:6380',
      prefix: 'gw1:',
      quotaLeaseMs: 200,
    })
  })

  test('redis.quotaLeaseMs: kept with the environment URL, 0 turns leases off, bounded', () => {
    const { config } = parse(`${BASE}redis: { url: "redis://file", quotaLeaseMs: 0 }\n`, {
      BARBICAN_REDIS_URL: 'redis://env',
    })
    assert.deepEqual(config.redis, { url: 'redis://env', prefix: 'barbican:', quotaLeaseMs: 0 })
    for (const bad of ['1001', '-1', '2.5', '"200"']) {
      const issues = issuesOf(() =>
        parse(`${BASE}redis: { url: "redis://c", quotaLeaseMs: ${bad} }\n`),
      )
      assert.equal(issues.length, 1, bad)
      assert.match(issues[0]!, /^redis\.quotaLeaseMs: /, bad)
    }
  })

  test('BARBICAN_POSTGRES_URL replaces the SQLite default; linked tokens follow it', () => {
    const { config } = parse(`${BASE}auth:\n  apiKeys: { keys: [] }\n`, {
      BARBICAN_POSTGRES_URL: 'postgres://env/db',
    })
    assert.equal(config.store?.kind, 'postgres')
    assert.deepEqual(config.auth?.tokens, { postgres: 'postgres://env/db', migrate: true })
    assert.equal(parse(BASE).config.store, undefined, 'without it: the embedded default')
  })

  test('bad URLs are named precisely, without repeating a password', () => {
    const issues = issuesOf(() =>
      parse(
        `${BASE}store:\n  postgres: { url: "mysql://u:hunter2@h/db" }\nredis: { url: "not a url" }\n`,
      ),
    )
    assert.equal(issues.length, 2, issues.join('\n'))
    assert.match(
      issues[0]!,
      /^store\.postgres\.url: has the scheme "mysql:"; expected postgres: or postgresql:/,
    )
    assert.match(issues[1]!, /^redis\.url: is not a URL/)
    assert.ok(issues.every((i) => !i.includes('hunter2')))
    const env = issuesOf(() =>
      parse(BASE, {
        BARBICAN_POSTGRES_URL: 'http://u:hunter2@h/db',
        BARBICAN_REDIS_URL: 'redis:///0',
      }),
    )
    assert.deepEqual(env, [
      'BARBICAN_POSTGRES_URL: has the scheme "http:"; expected postgres: or postgresql:',
      'BARBICAN_REDIS_URL: names no host',
    ])
  })

  test('unknown keys under store.postgres and redis are refused', () => {
    const issues = issuesOf(() =>
      parse(`${BASE}store:\n  postgres: { url: "postgres://h/db", pool: 3 }\n`),
    )
    assert.ok(
      issues.some((i) => i.startsWith('store')),
      issues.join('\n'),
    )
  })
})
