import assert from 'node:assert/strict'
import { once } from 'node:events'
import { describe, test } from 'node:test'
import { fixture, Inbox } from '../../test/fixtures/upstream-helpers.ts'
import { BarbicanError } from '../errors.ts'
import { silentLogger } from '../log.ts'
import { DEFAULT_JSON_LIMITS } from '../protocol/json-limits.ts'
import type { StdioOutboundTransport } from '../transports/stdio-outbound.ts'
import {
  type BackoffOptions,
  backoffDelay,
  type ExitedEvent,
  type RestartingEvent,
  StdioSupervisor,
  type SupervisorState,
} from './supervisor.ts'

function supervise(args: string[], backoff: BackoffOptions) {
  return new StdioSupervisor({
    name: 'lines',
    log: silentLogger,
    process: {
      name: 'lines',
      command: process.execPath,
      args: [fixture('upstream-line-server.ts'), ...args],
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
    },
    backoff: { jitter: 0, ...backoff },
  })
}

/** Waits for the next event of one kind, failing the test instead of hanging. */
async function next<T>(emitter: StdioSupervisor, event: string, timeoutMs = 10_000): Promise<T> {
  const [value] = await once(emitter, event, { signal: AbortSignal.timeout(timeoutMs) })
  return value as T
}

describe('stdio supervisor', () => {
  test('computes capped exponential delays, with jitter only ever shortening them', () => {
    const options = { baseMs: 100, factor: 2, maxMs: 1000, jitter: 0.2 }
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, options, 0)),
      [100, 200, 400, 800, 1000, 1000],
    )
    assert.equal(backoffDelay(3, options, 1), 320)
    assert.equal(backoffDelay(1, {}, 0), 250)
  })

  test('reports starting then running, and hands out the running transport', async () => {
    const supervisor = supervise([], {})
    const states: SupervisorState[] = []
    supervisor.on('state', (state) => states.push(state))
    supervisor.start()
    try {
      const transport = await supervisor.current()
      assert.equal(supervisor.state, 'running')
      assert.deepEqual(states, ['starting', 'running'])
      assert.equal(transport.isOpen, true)
      assert.equal(supervisor.transport, transport)
    } finally {
      await supervisor.stop()
    }
    assert.equal(supervisor.state, 'stopped')
  })

  test('restarts a server that crashed mid-request, and the next run answers', async () => {
    const supervisor = supervise([], { baseMs: 20 })
    const inboxes = new Map<StdioOutboundTransport, Inbox>()
    supervisor.onTransport((transport) => inboxes.set(transport, new Inbox(transport)))
    supervisor.start()
    try {
      const first = await supervisor.current()
      const exited = next<ExitedEvent>(supervisor, 'exited')
      const restarting = next<RestartingEvent>(supervisor, 'restarting')
      await first.send({ jsonrpc: '2.0', id: 1, method: 'crash' })
      await inboxes.get(first)!.closing()
      assert.equal((await exited).code, 3)
      assert.equal((await exited).expected, false)
      assert.deepEqual(await restarting, { delayMs: 20, attempt: 1 })

      await next(supervisor, 'started')
      const second = await supervisor.current()
      assert.notEqual(second, first)
      await second.send({ jsonrpc: '2.0', id: 2, method: 'echo', params: { again: true } })
      const reply = await inboxes.get(second)!.response(2)
      assert.deepEqual(reply, { jsonrpc: '2.0', id: 2, result: { again: true } })
      assert.equal(supervisor.runs, 2)
    } finally {
      await supervisor.stop()
    }
  })

  test('spaces the restarts of a crash loop by growing delays up to the cap', async () => {
    const supervisor = supervise(['exit-at-once'], { baseMs: 20, factor: 2, maxMs: 100 })
    const restarts: Array<RestartingEvent & { at: number }> = []
    const starts: number[] = []
    supervisor.on('state', (state) => {
      if (state === 'starting') starts.push(Date.now())
    })
    const done = new Promise<void>((resolve) => {
      supervisor.on('restarting', (event) => {
        restarts.push({ ...event, at: Date.now() })
        if (restarts.length === 6) resolve()
      })
    })
    supervisor.start()
    try {
      await Promise.race([
        done,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('crash loop too slow')), 20_000).unref(),
        ),
      ])
    } finally {
      await supervisor.stop()
    }
    assert.deepEqual(
      restarts.map((r) => r.delayMs),
      [20, 40, 80, 100, 100, 100],
    )
    assert.deepEqual(
      restarts.map((r) => r.attempt),
      [1, 2, 3, 4, 5, 6],
    )
    // Each run began no sooner than its announced delay after the previous exit.
    for (let i = 0; i < 5; i++) {
      const restart = restarts[i]!
      const nextStart = starts[i + 1]!
      assert.ok(nextStart - restart.at >= restart.delayMs - 1, `restart ${i + 1} waited its delay`)
    }
    assert.equal(supervisor.state, 'stopped')
  })

  test('forgets past failures after a stable run', async () => {
    // With stableAfterMs 0 every run that started counts as stable: delays never grow.
    const supervisor = supervise([], { baseMs: 20, stableAfterMs: 0 })
    const delays: number[] = []
    supervisor.on('restarting', (event) => delays.push(event.delayMs))
    supervisor.start()
    try {
      for (let i = 0; i < 2; i++) {
        const transport = await supervisor.current()
        const restarting = next(supervisor, 'restarting')
        await transport.send({ jsonrpc: '2.0', id: 1, method: 'crash' })
        await restarting
      }
    } finally {
      await supervisor.stop()
    }
    assert.deepEqual(delays, [20, 20])
  })

  test('stop() shuts the process down, never restarts it, and fails waiting callers', async () => {
    const supervisor = supervise([], { baseMs: 20 })
    const restarts: RestartingEvent[] = []
    supervisor.on('restarting', (event) => restarts.push(event))
    supervisor.start()
    const transport = await supervisor.current()
    const exited = next<ExitedEvent>(supervisor, 'exited')
    await supervisor.stop()
    assert.equal((await exited).expected, true)
    assert.deepEqual(transport.exitStatus, { code: 0, signal: null })
    assert.deepEqual(restarts, [])
    assert.equal(supervisor.state, 'stopped')
    await assert.rejects(
      supervisor.current(),
      (err) => err instanceof BarbicanError && err.code === 'ERR_SHUTTING_DOWN',
    )
  })

  test('keeps retrying a command that cannot be spawned, in backoff between attempts', async () => {
    const supervisor = new StdioSupervisor({
      name: 'missing',
      log: silentLogger,
      process: {
        name: 'missing',
        command: '/nonexistent/barbican-test-command',
        log: silentLogger,
        limits: DEFAULT_JSON_LIMITS,
      },
      backoff: { baseMs: 10, jitter: 0 },
    })
    const exited = next<ExitedEvent>(supervisor, 'exited')
    const restarting = next<RestartingEvent>(supervisor, 'restarting')
    supervisor.start()
    try {
      assert.equal((await exited).error instanceof BarbicanError, true)
      assert.equal((await restarting).attempt, 1)
      assert.equal(supervisor.state, 'backoff')
      await assert.rejects(
        supervisor.current(50),
        (err) => err instanceof BarbicanError && err.code === 'ERR_UPSTREAM_UNAVAILABLE',
      )
    } finally {
      await supervisor.stop()
    }
  })
})
