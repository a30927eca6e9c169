import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { callOf, countingRelay } from '../../test/support/calls.ts'
import type { AuditSink } from '../audit/audit-log.ts'
import type { AuditEvent, CallEvent } from '../audit/record.ts'
import { BarbicanError } from '../common/errors.ts'
import { canonicalHash } from '../trust/canonical.ts'
import { auditPolicy, redact } from './audit.ts'
import { authorize } from './authorize.ts'
import { compose } from './chain.ts'
import { guards } from './guards.ts'
import type { Call } from './policy.ts'

function collecting(): AuditSink & { events: AuditEvent[] } {
  const events: AuditEvent[] = []
  return { events, record: async (e) => void events.push(e) }
}

const alice = {
  subject: 'alice',
  tenant: 'acme',
  client: 'ide',
  scopes: [],
  method: 'jwt',
} as const

function toolCall(name: string, args: unknown, overrides: Partial<Call> = {}): Call {
  return callOf(
    'tools/call',
    { name, arguments: args },
    {
      identity: alice,
      route: { kind: 'unicast', upstream: 'files', original: 'read_file' },
      decisions: [],
      ...overrides,
    },
  )
}

describe('audit policy', () => {
  test('records who called what where, the argument digest, outcome and the deciding rule', async () => {
    const sink = collecting()
    const chain = compose(
      [
        authorize([
          { servers: ['other'], tools: ['*'] },
          { servers: ['*'], tools: ['files__*'] },
        ]),
        auditPolicy({ sink }),
      ],
      countingRelay().relay,
    )
    await chain(toolCall('files__read', { path: '/etc/hosts', b: 1 }))
    const e = sink.events[0] as CallEvent
    assert.equal(sink.events.length, 1)
    assert.deepEqual(
      [e.subject, e.tenant, e.client, e.server, e.upstream, e.method, e.target, e.outcome],
      ['alice', 'acme', 'ide', 'default', 'files', 'tools/call', 'files__read', 'ok'],
    )
    assert.match(e.argsDigest!, /^[0-9a-f]{64}$/)
    // The documented digest: SHA-256 of the canonical JSON, as trust computes it.
    assert.equal(e.argsDigest, canonicalHash({ path: '/etc/hosts', b: 1 }))
    assert.equal(e.args, undefined, 'raw arguments only by opt-in')
    assert.deepEqual([e.decision, e.rule], ['allow', 'auth.permissions[1]'])
    // Key order does not change the digest (canonical JSON).
    await chain(toolCall('files__read', { b: 1, path: '/etc/hosts' }))
    assert.equal((sink.events[1] as CallEvent).argsDigest, e.argsDigest)
  })

  test('records a refusal by authorize as denied, and the caller still gets the refusal', async () => {
    const sink = collecting()
    const chain = compose(
      [authorize([{ servers: ['*'], tools: ['read'] }]), auditPolicy({ sink })],
      countingRelay().relay,
    )
    await assert.rejects(chain(toolCall('write', {})), { code: 'ERR_POLICY_DENIED' })
    const e = sink.events[0] as CallEvent
    assert.deepEqual([e.outcome, e.errorCode, e.decision], ['denied', 'ERR_POLICY_DENIED', 'deny'])
  })

  test('records an upstream error reply and a quarantined tool', async () => {
    const sink = collecting()
    const errorReply = compose([auditPolicy({ sink })], async (call) => ({
      kind: 'error' as const,
      id: call.request.id,
      code: -32602,
      message: 'bad',
    }))
    await errorReply(toolCall('x', {}))
    const quarantined = compose([auditPolicy({ sink })], async () => {
      throw new BarbicanError('ERR_TOOL_QUARANTINED', 'x is quarantined')
    })
    await assert.rejects(quarantined(toolCall('x', {})))
    const [a, b] = sink.events as CallEvent[]
    assert.deepEqual([a!.outcome, a!.errorCode], ['error', '-32602'])
    assert.deepEqual(
      [b!.outcome, b!.errorCode, b!.pinState],
      ['error', 'ERR_TOOL_QUARANTINED', 'quarantined'],
    )
  })

  test('records a tool result with isError as an error (tool_error), as /metrics counts it', async () => {
    const sink = collecting()
    const failed = compose([auditPolicy({ sink })], async (call) => ({
      kind: 'result' as const,
      id: call.request.id,
      resultType: 'complete' as const,
      result: {
        content: [{ type: 'text', text: "EROFS: read-only file system, open '/x'" }],
        isError: true,
      },
    }))
    await failed(toolCall('x', {}))
    const [e] = sink.events as CallEvent[]
    assert.deepEqual([e!.outcome, e!.errorCode], ['error', 'tool_error'])
  })

  test('the reply waits until the record is durable', async () => {
    let release!: () => void
    const sink: AuditSink = { record: () => new Promise<void>((r) => (release = r)) }
    const chain = compose([auditPolicy({ sink })], countingRelay().relay)
    let settled = false
    const reply = chain(toolCall('x', {})).then(() => (settled = true))
    await new Promise((r) => setTimeout(r, 20))
    assert.equal(settled, false)
    release()
    await reply
    assert.equal(settled, true)
  })

  test('a record that cannot be written withholds the reply with ERR_AUDIT_UNAVAILABLE', async () => {
    const sink: AuditSink = { record: () => Promise.reject(new Error('disk full')) }
    const { calls, relay } = countingRelay()
    const chain = compose([auditPolicy({ sink })], relay)
    await assert.rejects(chain(toolCall('x', {})), { code: 'ERR_AUDIT_UNAVAILABLE' })
    assert.equal(calls.length, 1)
  })

  test('keeps redacted arguments only when asked, and the trace id of a traceparent', async () => {
    const sink = collecting()
    const chain = compose([auditPolicy({ sink, rawArguments: true })], countingRelay().relay)
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    await chain(
      callOf(
        'tools/call',
        {
          name: 'login',
          arguments: {
            user: 'a',
            password: 'hunter2',
            nested: { apiKey: 'k', note: 'x'.repeat(2000) },
          },
          _meta: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
        },
        { decisions: [] },
      ),
    )
    const e = sink.events[0] as CallEvent
    assert.equal(e.traceId, traceId)
    const args = e.args as {
      user: string
      password: string
      nested: { apiKey: string; note: string }
    }
    assert.equal(args.user, 'a')
    assert.equal(args.password, '[REDACTED]')
    assert.equal(args.nested.apiKey, '[REDACTED]')
    assert.ok(args.nested.note.length < 1100)
    assert.equal(e.decision, 'none')
  })

  test('redact leaves numbers, booleans and null alone', () => {
    assert.deepEqual(redact({ n: 1, b: true, z: null, list: [{ token: 't' }] }), {
      n: 1,
      b: true,
      z: null,
      list: [{ token: '[REDACTED]' }],
    })
  })

  test('records the secrets guards redacted from the result, by kind', async () => {
    const sink = collecting()
    const chain = compose(
      [
        auditPolicy({ sink }),
        guards({
          arguments: 'off',
          output: 'off',
          oversize: 'error',
          redact: true,
          redactPatterns: [],
        }),
      ],
      async (call) => ({
        kind: 'result' as const,
        id: call.request.id,
        resultType: 'complete',
        result: { content: [{ type: 'text', text: 'AKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLF' }] },
      }),
    )
    await chain(toolCall('files__read', {}))
    assert.deepEqual((sink.events[0] as CallEvent).redactions, { 'aws-access-key': 2 })
    await compose([auditPolicy({ sink })], countingRelay().relay)(toolCall('files__read', {}))
    assert.equal((sink.events[1] as CallEvent).redactions, undefined)
  })
})
