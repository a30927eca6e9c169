import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { planConnects, procNetEntry, proxyEnvironment } from './forwarders.ts'

describe('connect forwards inside the sandbox', () => {
  test('a loopback grant listens as itself; localhost on 127.0.0.1; names get 127.0.0.2 and on', () => {
    const plan = planConnects([
      { host: '127.0.0.1', port: 5432, source: 'arg 1' },
      { host: 'localhost', port: 6379, source: 'env REDIS_URL' },
      { host: 'db.internal', port: 5432, source: 'env DATABASE_URL' },
      { host: 'cache.internal', port: 6379, source: 'arg 2' },
      { host: 'DB.internal', port: 5433, source: 'arg 3' },
      { host: '[::1]', port: 8080, source: 'arg 4' },
    ])
    assert.deepEqual(
      plan.forwards.map((f) => [f.address, f.grant.port, f.name ?? null, f.socket]),
      [
        ['127.0.0.1', 5432, null, 'connect-0.sock'],
        ['127.0.0.1', 6379, null, 'connect-1.sock'],
        ['127.0.0.2', 5432, 'db.internal', 'connect-2.sock'],
        ['127.0.0.3', 6379, 'cache.internal', 'connect-3.sock'],
        ['127.0.0.2', 5433, 'db.internal', 'connect-4.sock'],
        ['::1', 8080, null, 'connect-5.sock'],
      ],
    )
    assert.deepEqual(plan.unreachable, [])
  })

  test('one listener per address and port; a literal non-loopback address is said unreachable', () => {
    const plan = planConnects([
      { host: 'localhost', port: 5432, source: 'arg 1' },
      { host: '127.0.0.1', port: 5432, source: 'arg 2' },
      { host: '10.0.0.5', port: 5432, source: 'env PGHOST' },
    ])
    assert.equal(plan.forwards.length, 1)
    assert.equal(plan.unreachable.length, 1)
    assert.match(plan.unreachable[0]!.reason, /10\.0\.0\.5 is an address, not a name/)
  })

  test('/proc/net entries are little-endian words, as the kernel prints them', () => {
    assert.equal(procNetEntry('127.0.0.1', 3128), '0100007F:0C38')
    assert.equal(procNetEntry('127.0.0.2', 5432), '0200007F:1538')
    assert.equal(procNetEntry('::1', 80), '00000000000000000000000001000000:0050')
  })

  test('forwarded hosts bypass the egress proxy', () => {
    const { forwards } = planConnects([{ host: 'db.internal', port: 5432, source: 'arg 1' }])
    const env = Object.fromEntries(proxyEnvironment(forwards))
    assert.equal(env.NO_PROXY, 'db.internal,127.0.0.2')
    assert.equal(env.HTTPS_PROXY, 'http://127.0.0.1:3128')
    assert.equal(Object.fromEntries(proxyEnvironment()).NO_PROXY, '')
  })
})
