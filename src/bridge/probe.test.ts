import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import { probeEra } from './probe.ts'

describe('era probe', () => {
  test('a DiscoverResult naming 2026-07-28 means modern', async () => {
    const verdict = await probeEra(async () => ({
      kind: 'result',
      id: 1,
      resultType: 'complete',
      serverInfo: { name: 's' },
      result: { supportedVersions: ['2026-07-28'], capabilities: { tools: {} } },
    }))
    assert.equal(verdict.era, 'modern')
    assert.deepEqual(verdict.era === 'modern' ? verdict.serverInfo : undefined, { name: 's' })
  })

  test('any error, silence or a closed connection means legacy', async () => {
    const error = await probeEra(async () => ({
      kind: 'error',
      id: 1,
      code: -32601,
      message: 'no',
    }))
    assert.deepEqual([error.era, error.era === 'legacy' && error.closed], ['legacy', false])
    const silent = await probeEra(async () => {
      throw new BarbicanError('ERR_UPSTREAM_TIMEOUT', 'late')
    })
    assert.equal(silent.era, 'legacy')
    const closed = await probeEra(async () => {
      throw new BarbicanError('ERR_UPSTREAM_CLOSED', 'gone')
    })
    assert.equal(closed.era === 'legacy' && closed.closed, true)
  })

  test('a server Barbican could not reach gives no verdict: the attempt fails, the next probes again', async () => {
    await assert.rejects(
      probeEra(async () => ({
        kind: 'error',
        id: 1,
        code: -32005,
        message: 'Upstream "web" is unreachable: connection refused',
        data: { barbicanCode: 'ERR_UPSTREAM_UNAVAILABLE' },
      })),
      (err: BarbicanError) =>
        err.code === 'ERR_UPSTREAM_UNAVAILABLE' && /unreachable/.test(err.message),
    )
  })

  test('a DiscoverResult without a version Barbican speaks means legacy', async () => {
    const verdict = await probeEra(async () => ({
      kind: 'result',
      id: 1,
      resultType: 'complete',
      result: { supportedVersions: ['2099-01-01'] },
    }))
    assert.equal(verdict.era, 'legacy')
  })

  test('-32022 naming 2026-07-28 is modern evidence: the probe asks once more instead of falling back', async () => {
    let calls = 0
    const verdict = await probeEra(async () =>
      ++calls === 1
        ? {
            kind: 'error',
            id: 1,
            code: -32022,
            message: 'v',
            data: { supported: ['2026-07-28'], requested: 'x' },
          }
        : {
            kind: 'result',
            id: 2,
            resultType: 'complete',
            result: { supportedVersions: ['2026-07-28'] },
          },
    )
    assert.equal(verdict.era, 'modern')
    assert.equal(calls, 2)
  })
})
