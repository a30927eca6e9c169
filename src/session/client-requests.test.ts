import assert from 'node:assert/strict'
import { test } from 'node:test'
import { METHOD_NOT_FOUND } from '../protocol/jsonrpc.ts'
import { clientRequestRefusal } from './client-requests.ts'

const sampling = { jsonrpc: '2.0' as const, id: 9, method: 'sampling/createMessage', params: {} }

test('a request needing a capability the client did not declare is refused under the upstream id', () => {
  const refusal = clientRequestRefusal(sampling, {}, '2025-11-25')
  assert.equal(refusal?.code, METHOD_NOT_FOUND)
  assert.equal(refusal?.id, 9)
  assert.match(refusal?.message ?? '', /sampling/)
})

test('a 2026-07-28 client, with no session to carry it, is never sent a request', () => {
  const refusal = clientRequestRefusal(sampling, { sampling: {} }, undefined)
  assert.match(refusal?.message ?? '', /cannot reach a client/)
})

test('a request the client declared and can carry is not refused', () => {
  assert.equal(clientRequestRefusal(sampling, { sampling: {} }, '2025-11-25'), undefined)
})
