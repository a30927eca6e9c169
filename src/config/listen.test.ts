import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { formatListen, isLoopbackHost, parseListen } from './listen.ts'

describe('parseListen', () => {
  test('reads host and port, with IPv6 hosts in brackets', () => {
    assert.deepEqual(parseListen('127.0.0.1:7300'), { host: '127.0.0.1', port: 7300 })
    assert.deepEqual(parseListen('localhost:0'), { host: 'localhost', port: 0 })
    assert.deepEqual(parseListen('[::1]:8080'), { host: '::1', port: 8080 })
  })

  test('explains what is wrong with a malformed address', () => {
    for (const bad of ['7300', 'localhost', '::1:7300', 'host:port', '[nope]:1', 'a:70000']) {
      const parsed = parseListen(bad)
      assert.ok('error' in parsed, bad)
    }
    assert.match((parseListen('a:70000') as { error: string }).error, /out of range/)
  })

  test('formats an address back, bracketing IPv6', () => {
    assert.equal(formatListen({ host: '::1', port: 1 }), '[::1]:1')
    assert.equal(formatListen({ host: '127.0.0.1', port: 7300 }), '127.0.0.1:7300')
  })
})

describe('isLoopbackHost', () => {
  test('recognizes loopback names and addresses', () => {
    for (const host of [
      'localhost',
      'LOCALHOST',
      'app.localhost',
      '127.0.0.1',
      '127.8.9.1',
      '::1',
      '[::1]',
      '::ffff:127.0.0.1',
    ]) {
      assert.equal(isLoopbackHost(host), true, host)
    }
  })

  test('treats wildcards, LAN addresses and other names as non-loopback', () => {
    for (const host of [
      '0.0.0.0',
      '::',
      '192.168.1.2',
      '10.0.0.1',
      'example.com',
      '::ffff:10.0.0.1',
    ]) {
      assert.equal(isLoopbackHost(host), false, host)
    }
  })
})
