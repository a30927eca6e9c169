import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ANONYMOUS } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import type { JsonRpcMessage, JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import { LostReplyFault, protocolFault } from '../transports/outbound-payload.ts'
import type { Transport } from '../transports/transport.ts'
import { type CallOwner, requestOwner, UpstreamClient } from './upstream-client.ts'

/** A client over a memory pair whose far end records what arrives and answers when told. */
async function connected(timeoutMs = 5_000) {
  const [near, far] = memoryPair()
  const received: JsonRpcMessage[] = []
  far.onmessage = (m) => void received.push(m)
  await far.start()
  const client = new UpstreamClient('up', near, {
    log: silentLogger,
    timeoutMs,
    revision: '2025-11-25',
  })
  await near.start()
  const requests = () => received.filter((m): m is JsonRpcRequest => 'id' in m && 'method' in m)
  const cancellations = () =>
    received.filter((m) => 'method' in m && m.method === 'notifications/cancelled')
  return { client, near, far, received, requests, cancellations }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 5))

const code = (error: unknown) => (error as BarbicanError).code

describe('the upstream client', () => {
  test('numbers requests itself and maps the answer back', async () => {
    const { client, far, requests } = await connected()
    const first = client.request('tools/call', { name: 'a' })
    const second = client.request('tools/call', { name: 'b' })
    await settle()
    const [r1, r2] = requests()
    assert.ok(r1 && r2)
    assert.notEqual(r1.id, r2.id)
    await far.send({ jsonrpc: '2.0', id: r2.id, result: { content: [], which: 2 } })
    await far.send({ jsonrpc: '2.0', id: r1.id, result: { content: [], which: 1 } })
    const [a, b] = await Promise.all([first, second])
    assert.equal(a.kind === 'result' && a.result.which, 1)
    assert.equal(b.kind === 'result' && b.result.which, 2)
    assert.equal(client.inFlight, 0)
  })

  test('fails at once the one request whose reply the transport could not use', async () => {
    const { client, near, far, requests } = await connected()
    const lost = client.request('tools/call', { name: 'flood' })
    const other = client.request('tools/call', { name: 'small' })
    await settle()
    const [r1, r2] = requests()
    // A fault without an id (garbage) fails nothing; the one naming r1's id fails r1 alone.
    near.onerror?.(protocolFault('not JSON'))
    near.onerror?.(new LostReplyFault('message exceeds limits.maxMessageBytes (9 bytes)', r1!.id))
    await assert.rejects(lost, (e) => {
      assert.equal(code(e), 'ERR_UPSTREAM_PROTOCOL')
      assert.match((e as Error).message, /unusable reply to tools\/call: .*limits\.maxMessageBytes/)
      return true
    })
    await far.send({ jsonrpc: '2.0', id: r2!.id, result: { content: [] } })
    assert.equal((await other).kind, 'result')
    assert.equal(client.inFlight, 0)
  })

  test('fails a request the upstream does not answer in time and tells the upstream', async () => {
    const { client, requests, cancellations } = await connected(30)
    await assert.rejects(client.request('tools/call', { name: 'slow' }), (e) => {
      assert.equal(code(e), 'ERR_UPSTREAM_TIMEOUT')
      assert.match((e as Error).message, /did not answer tools\/call within 30 ms/)
      return true
    })
    await settle()
    const [sent] = requests()
    assert.deepEqual(
      cancellations().map((m) => ('params' in m ? m.params?.requestId : undefined)),
      [sent?.id],
    )
    assert.equal(client.inFlight, 0)
  })

  test('fails at once when the caller aborts, tells the upstream, and ignores a late answer', async () => {
    const { client, far, requests, cancellations } = await connected()
    const controller = new AbortController()
    const call = client.request('tools/call', { name: 'x' }, { signal: controller.signal })
    await settle()
    controller.abort()
    await assert.rejects(call, (e) => code(e) === 'ERR_CANCELLED')
    await settle()
    const [sent] = requests()
    assert.equal(cancellations().length, 1)
    assert.equal(client.inFlight, 0)
    await far.send({ jsonrpc: '2.0', id: sent!.id, result: { content: [] } })
    await settle()
    assert.equal(client.inFlight, 0)
    // The signal no longer reaches the finished request.
    controller.abort()
    await settle()
    assert.equal(cancellations().length, 1)
  })

  test('refuses an already aborted signal without sending', async () => {
    const { client, received } = await connected()
    const controller = new AbortController()
    controller.abort()
    await assert.rejects(
      client.request('ping', undefined, { signal: controller.signal }),
      (e) => code(e) === 'ERR_CANCELLED',
    )
    await settle()
    assert.equal(received.length, 0)
  })

  test('an answered request leaves no timer or listener behind', async () => {
    const { client, far, requests, cancellations } = await connected(40)
    const controller = new AbortController()
    const call = client.request('ping', undefined, { signal: controller.signal })
    await settle()
    await far.send({ jsonrpc: '2.0', id: requests()[0]!.id, result: {} })
    assert.equal((await call).kind, 'result')
    controller.abort()
    await new Promise((resolve) => setTimeout(resolve, 60))
    assert.equal(cancellations().length, 0, 'neither the abort nor the timeout fired')
  })

  test('each request times out at its own deadline, a shorter one after a longer one too', async () => {
    const { client } = await connected(5_000)
    const started = performance.now()
    const long = client.request('ping', undefined, { timeoutMs: 400 })
    const short = client.request('ping', undefined, { timeoutMs: 30 })
    long.catch(() => {})
    await assert.rejects(short, (e) => code(e) === 'ERR_UPSTREAM_TIMEOUT')
    const shortAfter = performance.now() - started
    assert.ok(shortAfter >= 29 && shortAfter < 300, `short timed out after ${shortAfter} ms`)
    assert.equal(client.inFlight, 1, 'the longer request still waits')
    await assert.rejects(long, (e) => code(e) === 'ERR_UPSTREAM_TIMEOUT')
    assert.ok(performance.now() - started >= 399)
    assert.equal(client.inFlight, 0)
  })

  test('with nothing in flight, no timer of the client keeps the process alive', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
    const { client, far, requests } = await connected()
    await settle()
    const before = timers()
    const call = client.request('ping', undefined)
    assert.equal(timers(), before + 1, 'a request in flight holds its deadline timer')
    await settle()
    await far.send({ jsonrpc: '2.0', id: requests()[0]!.id, result: {} })
    await call
    assert.equal(timers(), before)
  })

  test('a send that fails rejects the request as unavailable', async () => {
    const failing: Transport = {
      start: async () => {},
      close: async () => {},
      send: () => Promise.reject(new Error('pipe closed')),
    }
    const client = new UpstreamClient('up', failing, {
      log: silentLogger,
      timeoutMs: 5_000,
      revision: '2025-11-25',
    })
    await assert.rejects(client.request('ping', undefined), (e) => {
      assert.equal(code(e), 'ERR_UPSTREAM_UNAVAILABLE')
      assert.equal(((e as Error).cause as Error).message, 'pipe closed')
      return true
    })
    assert.equal(client.inFlight, 0)
  })

  test('a closing connection fails every request in flight', async () => {
    const { client, far } = await connected()
    const call = client.request('ping', undefined)
    await settle()
    await far.close()
    await assert.rejects(call, (e) => code(e) === 'ERR_UPSTREAM_CLOSED')
    await assert.rejects(client.request('ping', undefined), (e) => e instanceof BarbicanError)
  })

  test('records the owner of each request for the transport', async () => {
    const seen: unknown[] = []
    const recording: Transport = {
      start: async () => {},
      close: async () => {},
      send: async (m) => void seen.push(requestOwner(m)),
    }
    const client = new UpstreamClient('up', recording, {
      log: silentLogger,
      timeoutMs: 20,
      revision: '2025-11-25',
    })
    const owner: CallOwner = {
      session: {
        requestClient: async () => ({ kind: 'result', id: 1, resultType: 'complete', result: {} }),
      },
      requestId: 1,
      caller: { identity: ANONYMOUS, clientCapabilities: {} },
    }
    await assert.rejects(client.request('ping', undefined, { owner }))
    assert.equal(seen[0], owner)
  })
})
