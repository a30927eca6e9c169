/**
 * An Upstream for unit tests: silent, a 5 s timeout, and upstream → client requests refused
 * with method-not-found (no client stands behind it).
 */
import { silentLogger } from '../../src/telemetry/log.ts'
import type { Transport } from '../../src/transports/transport.ts'
import { Upstream } from '../../src/upstreams/upstream.ts'

export function testUpstream(name: string, createTransport: () => Transport): Upstream {
  return new Upstream({
    name,
    log: silentLogger,
    requestTimeoutMs: 5_000,
    createTransport,
    clientInfo: { name: 'barbican', version: '0' },
    clientCapabilities: {},
    onRequest: async (_upstream, request) => ({
      kind: 'error',
      id: request.id,
      code: -32601,
      message: 'no',
    }),
  })
}
