/**
 * Every 2026-07-28 request is a session of its own (transports/streamable-http-stateless.ts), so
 * what a session draws at birth is paid per call: its id comes from the pooled random bytes
 * (common/random-hex.ts), not a CSPRNG draw of its own, which costs a `getpid` syscall in
 * OpenSSL (bench/strace.ts counted one per call).
 */
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import { syncBuiltinESMExports } from 'node:module'
import { test } from 'node:test'
import { rules, serverPlan } from '../../test/support/plans.ts'
import { Gateway } from '../gateway/gateway.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'

test('a session takes its id from the pool: 200 sessions, at most one CSPRNG draw', async () => {
  const gateway = new Gateway(
    {
      upstreams: [],
      servers: [serverPlan('default', [], rules('never'))],
      clientRequestTimeoutMs: 5_000,
    },
    silentLogger,
  )
  const draws: string[] = []
  const { randomBytes, randomFillSync } = crypto
  // The named imports of node:crypto follow its CommonJS exports once synced.
  crypto.randomBytes = ((...args: Parameters<typeof randomBytes>) => {
    draws.push('randomBytes')
    return randomBytes(...args)
  }) as typeof randomBytes
  crypto.randomFillSync = ((...args: Parameters<typeof randomFillSync>) => {
    draws.push('randomFillSync')
    return randomFillSync(...args)
  }) as typeof randomFillSync
  syncBuiltinESMExports()
  try {
    for (let i = 0; i < 200; i++) {
      const [, gatewaySide] = memoryPair()
      gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
    }
  } finally {
    crypto.randomBytes = randomBytes
    crypto.randomFillSync = randomFillSync
    syncBuiltinESMExports()
  }
  assert.equal(gateway.sessions.size, 200)
  assert.ok(draws.length <= 1, `${draws.length} CSPRNG draws for 200 sessions`)
  await gateway.stop()
})
