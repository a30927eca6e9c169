/**
 * A policy-chain Call for tests: a request from an identity, with every other member defaulted
 * and any of them overridden.
 */
import { ANONYMOUS } from '../../src/auth/identity.ts'
import type { Call, Reply } from '../../src/policies/policy.ts'
import type { Request } from '../../src/protocol/model.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

export function callOf(
  method: string,
  params: Record<string, unknown> = {},
  overrides: Partial<Call> = {},
): Call {
  return {
    id: 'c1',
    request: { kind: 'request', id: 1, method, params } as Request,
    identity: ANONYMOUS,
    server: 'default',
    transport: 'streamable-http',
    route: { kind: 'local' },
    signal: new AbortController().signal,
    log: silentLogger,
    ...overrides,
  }
}

/** A relay that answers every call with `{ ok: true }` and counts the calls it saw. */
export function countingRelay(): { readonly calls: Call[]; relay: (call: Call) => Promise<Reply> } {
  const calls: Call[] = []
  return {
    calls,
    relay: async (call) => {
      calls.push(call)
      return { kind: 'result', id: call.request.id, resultType: 'complete', result: { ok: true } }
    },
  }
}
