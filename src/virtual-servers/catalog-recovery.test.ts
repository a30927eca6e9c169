import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { CatalogRecovery, type ListTiming, listRetryDelay } from './catalog-recovery.ts'

const timing: ListTiming = {
  listDeadlineMs: 100,
  handshakeWaitMs: 50,
  listRetryMs: 40,
  listRetryMaxMs: 200,
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Waits until `done()` holds. Timers only ever fire late on a loaded machine, so tests wait for
 * what must happen and check lower bounds on when it did, never a count at a fixed instant.
 */
async function until(done: () => boolean, what: string, limitMs = 5_000): Promise<void> {
  const deadline = Date.now() + limitMs
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

/** A host whose fetches fail until `healthy` is set; it records when each fetch happened. */
function host() {
  const state = {
    healthy: false,
    fetches: [] as number[],
    names: [] as string[],
    back: [] as string[],
  }
  const started = Date.now()
  return Object.assign(state, {
    fetch: async (name: string) => {
      state.fetches.push(Date.now() - started)
      state.names.push(name)
      if (!state.healthy) throw new Error('lists failed')
    },
    recovered: (name: string) => void state.back.push(name),
  })
}

describe('listRetryDelay', () => {
  test('starts at listRetryMs and doubles up to listRetryMaxMs', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 40].map((n) => listRetryDelay(timing, n)),
      [40, 80, 160, 200, 200, 200],
    )
  })
})

describe('CatalogRecovery', () => {
  test('retries a failed member in the background with growing delays until it is back', async () => {
    const h = host()
    const recovery = new CatalogRecovery(timing, h)
    recovery.failed('slow', 'boom')
    assert.equal(recovery.missing('slow'), 'boom')
    assert.deepEqual(h.fetches, [], 'nothing is fetched at once')
    await until(() => h.fetches.length >= 2, 'two retries')
    const [first = 0, second = 0] = h.fetches
    assert.ok(first >= 35, `first retry at ${first} ms`)
    assert.ok(second - first >= 75, `second retry ${second - first} ms after the first`)
    assert.equal(recovery.missing('slow'), 'lists failed', 'the latest reason is kept')
    h.healthy = true
    recovery.retryNow('slow')
    await until(() => h.back.length > 0, 'the recovery')
    assert.deepEqual(h.back, ['slow'])
    assert.equal(recovery.missing('slow'), undefined)
    recovery.stop()
  })

  test('joins the lists of a late member as they arrive, without fetching again', async () => {
    const h = host()
    const recovery = new CatalogRecovery(timing, h)
    let arrive!: () => void
    recovery.late('late', 'not ready', new Promise<void>((resolve) => (arrive = resolve)))
    recovery.late('late', 'not ready', Promise.resolve())
    await sleep(10)
    assert.deepEqual(h.back, [], 'a second build does not double the wait')
    arrive()
    await sleep(5)
    assert.deepEqual(h.back, ['late'])
    assert.deepEqual(h.fetches, [])
  })

  test('stops retrying when stopped or when the member is forgotten', async () => {
    const h = host()
    const recovery = new CatalogRecovery(timing, h)
    recovery.failed('a', 'x')
    recovery.failed('b', 'x')
    recovery.forget('a')
    assert.equal(recovery.missing('a'), undefined)
    await until(() => h.fetches.length >= 1, 'the retry of b')
    recovery.stop()
    const fetched = h.fetches.length
    await sleep(250)
    assert.ok(
      h.names.every((n) => n === 'b'),
      `only b was retried: ${h.names.join(', ')}`,
    )
    assert.equal(h.fetches.length, fetched, 'nothing is retried once stopped')
    assert.deepEqual(h.back, [])
  })
})
