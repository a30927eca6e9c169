import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Request } from '../protocol/model.ts'
import { upstreamEnvelope } from './translate.ts'

const facts = {
  clientCapabilities: { roots: { listChanged: true }, tasks: {} },
  logLevel: undefined,
  serverInfo: { name: 'barbican', version: '1' },
}

function request(envelope?: Request['envelope']): Request {
  return {
    kind: 'request',
    id: 1,
    method: 'tools/call',
    params: {},
    ...(envelope ? { envelope } : {}),
  }
}

test("a 2026-07-28 client's own envelope is passed upstream, with Barbican's serverInfo when it names no clientInfo", () => {
  const envelope = upstreamEnvelope(
    request({
      protocolVersion: '2026-07-28',
      clientCapabilities: { sampling: {} },
      logLevel: 'error',
    }),
    facts,
  )
  assert.deepEqual(envelope, {
    clientCapabilities: { sampling: {} },
    clientInfo: facts.serverInfo,
    logLevel: 'error',
  })
})

test("a legacy client's capabilities are translated, and it is logged at debug until it sets a level", () => {
  const envelope = upstreamEnvelope(request(), facts)
  assert.deepEqual(envelope.clientCapabilities, { roots: {} })
  assert.equal(envelope.logLevel, 'debug')
  assert.equal(upstreamEnvelope(request(), { ...facts, logLevel: 'warning' }).logLevel, 'warning')
})
