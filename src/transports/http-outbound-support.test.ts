import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { networkError, networkReason } from './http-outbound-support.ts'

/** A socket error as node:http raises it. */
function socketError(code: string, facts: Record<string, unknown>): Error {
  return Object.assign(new Error(`${code} (raw)`), { code, ...facts })
}

describe('network failures in words', () => {
  test('a name DNS cannot resolve names the host and is not called a refusal', () => {
    const notFound = networkReason(socketError('ENOTFOUND', { hostname: 'mcp.example.invalid' }))
    assert.equal(notFound, 'cannot resolve "mcp.example.invalid": DNS has no such name (ENOTFOUND)')
    const again = networkReason(socketError('EAI_AGAIN', { hostname: 'mcp.example.com' }))
    assert.match(again, /^cannot resolve "mcp\.example\.com": DNS did not answer \(EAI_AGAIN\)/)
    assert.doesNotMatch(`${notFound} ${again}`, /refus/i)
  })

  test('reads the facts from the cause of a fetch error', () => {
    const failed = new TypeError('fetch failed', {
      cause: socketError('ECONNREFUSED', { address: '127.0.0.1', port: 9 }),
    })
    assert.equal(
      networkError(failed, 'up').message,
      'Upstream "up" is unreachable: connection refused at 127.0.0.1:9: nothing listens there (ECONNREFUSED)',
    )
  })

  test('an error without a code keeps its message', () => {
    assert.equal(networkReason(new Error('socket hang up')), 'socket hang up')
  })
})
