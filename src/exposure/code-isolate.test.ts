import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { type HostFunction, type IsolateLimits, runIsolated } from './code-isolate.ts'

const LIMITS: IsolateLimits = {
  memoryBytes: 16 * 1024 * 1024,
  stackBytes: 256 * 1024,
  timeoutMs: 1500,
  maxCalls: 5,
  maxOutputBytes: 1024,
}

/** One namespace `kv` with `get` (echoes its key) and `fail` (always rejects). */
function host(seen: unknown[] = []): Map<string, Map<string, HostFunction>> {
  return new Map([
    [
      'kv',
      new Map<string, HostFunction>([
        [
          'get',
          async (args) => {
            seen.push(args)
            return { value: `v:${(args as { key: string }).key}` }
          },
        ],
        [
          'fail',
          async () => {
            throw new Error('upstream said no')
          },
        ],
      ]),
    ],
  ])
}

const run = (code: string, seen?: unknown[], limits = LIMITS, signal?: AbortSignal) =>
  runIsolated(code, host(seen), limits, signal ?? new AbortController().signal)

describe('the code isolate', () => {
  test('awaits host functions, in parallel too, and returns console lines and the value', async () => {
    const seen: unknown[] = []
    const out = await run(
      `console.log('start', { n: 1 }); console.warn('careful')
       const [a, b] = await Promise.all([kv.get({ key: 'a' }), kv.get({ key: 'b' })])
       return [a.value, b.value]`,
      seen,
    )
    assert.equal(out.error, undefined)
    assert.deepEqual(out.logs, ['start {"n":1}', '[warn] careful'])
    assert.equal(out.value, '["v:a","v:b"]')
    assert.equal(out.calls, 2)
    assert.deepEqual(seen, [{ key: 'a' }, { key: 'b' }])
  })

  test('a host failure rejects inside the program, which may catch it', async () => {
    const out = await run(`try { await kv.fail({}) } catch (e) { return 'caught: ' + e.message }`)
    assert.equal(out.value, '"caught: upstream said no"')
  })

  test('a program error and a syntax error are ERR_CODE_FAILED with the message', async () => {
    const thrown = await run(`throw new TypeError('bad thing')`)
    assert.equal(thrown.error?.code, 'ERR_CODE_FAILED')
    assert.match(thrown.error?.message ?? '', /^TypeError: bad thing/)
    const syntax = await run(`return )(`)
    assert.equal(syntax.error?.code, 'ERR_CODE_FAILED')
    assert.match(syntax.error?.message ?? '', /SyntaxError/)
  })

  test('the bridge and the namespaces cannot be taken or replaced', async () => {
    const out = await run(`
      kv.get = async () => 'forged'
      globalThis.kv = { get: async () => 'forged' }
      return [typeof __barbicanCall, (await kv.get({ key: 'k' })).value]`)
    assert.equal(out.value, '["undefined","v:k"]')
  })

  test('a namespace holds exactly the host functions it was given', async () => {
    const out = await run(`return await kv.get.call(null, { key: 1 }).then(() => Object.keys(kv))`)
    assert.equal(out.value, '["get","fail"]')
  })

  test('time, memory, stack and calls are limits (ERR_CODE_LIMIT) with the limit named', async () => {
    const cases: [string, string][] = [
      ['while (true) {}', 'timeoutMs'],
      ['const a = []; for (;;) a.push(new Array(50000).fill(0))', 'memoryBytes'],
      ['const f = () => f() + 1; f()', 'stackBytes'],
      ['for (let i = 0; i < 10; i++) await kv.get({ key: i })', 'maxCalls'],
    ]
    for (const [code, limit] of cases) {
      // The time limit is what the first case waits for: a short one, so it is not waited long.
      const out = await run(code, undefined, { ...LIMITS, timeoutMs: 300 })
      assert.equal(out.error?.code, 'ERR_CODE_LIMIT', `${code}: ${out.error?.message}`)
      assert.equal((out.error?.data as { limit: string } | undefined)?.limit, limit, code)
    }
  })

  test('a host call that never answers is cut at the deadline', async () => {
    const never = new Map([
      ['slow', new Map<string, HostFunction>([['wait', () => new Promise(() => {})]])],
    ])
    const started = Date.now()
    const limits = { ...LIMITS, timeoutMs: 300 }
    const out = await runIsolated(
      'await slow.wait({})',
      never,
      limits,
      new AbortController().signal,
    )
    assert.equal(out.error?.code, 'ERR_CODE_LIMIT')
    assert.ok(Date.now() - started < limits.timeoutMs + 1000)
  })

  test('a promise nothing will settle ends the run at once', async () => {
    const out = await run('await new Promise(() => {})')
    assert.equal(out.error?.code, 'ERR_CODE_FAILED')
    assert.match(out.error?.message ?? '', /nothing will settle/)
  })

  test('output past the budget is cut and flagged', async () => {
    const out = await run(
      `for (let i = 0; i < 500; i++) console.log('line ' + i); return 'x'.repeat(5000)`,
    )
    assert.equal(out.truncated, true)
    const kept =
      out.logs.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0) + (out.value?.length ?? 0)
    assert.ok(kept <= LIMITS.maxOutputBytes, `${kept} bytes kept`)
  })

  test('a run cancelled while it waits on the host stops at once', async () => {
    const never = new Map([
      ['slow', new Map<string, HostFunction>([['wait', () => new Promise(() => {})]])],
    ])
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 50)
    const started = Date.now()
    const out = await runIsolated('await slow.wait({})', never, LIMITS, controller.signal)
    assert.equal(out.error?.code, 'ERR_CANCELLED')
    assert.ok(Date.now() - started < LIMITS.timeoutMs)
  })
})

describe('the time limit while a call waits for a human (ADR 083)', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const LIMIT = 600
  const limits = { ...LIMITS, timeoutMs: LIMIT }
  /** `human.ask` holds the clock for `waitMs` (a person deciding), then answers; `kv.get` echoes. */
  const withHuman = (waitMs: number) =>
    new Map([
      ...host(),
      [
        'human',
        new Map<string, HostFunction>([
          [
            'ask',
            async (_args, _signal, clock) => {
              clock.hold()
              try {
                await sleep(waitMs)
                return 'yes'
              } finally {
                clock.release()
              }
            },
          ],
        ]),
      ],
    ])

  test('does not run while the program only waits for the answer', async () => {
    const out = await runIsolated(
      `const a = await human.ask({}); const b = await kv.get({ key: 'k' }); return [a, b.value]`,
      withHuman(LIMIT * 2),
      limits,
      new AbortController().signal,
    )
    assert.equal(out.error, undefined, out.error?.message)
    assert.equal(out.value, '["yes","v:k"]')
  })

  test('still runs while the program computes meanwhile: a loop is stopped', async () => {
    const started = Date.now()
    const out = await runIsolated(
      `await Promise.all([human.ask({}), (async () => { await kv.get({ key: 'k' }); for (;;) {} })()])`,
      withHuman(LIMIT * 5),
      limits,
      new AbortController().signal,
    )
    assert.equal(out.error?.code, 'ERR_CODE_LIMIT')
    assert.match(out.error?.message ?? '', /time limit/)
    assert.ok(Date.now() - started < LIMIT * 3, 'stopped at its limit, not after the human')
  })

  test('runs again once the answer is in, with what was left of it', async () => {
    const started = Date.now()
    const out = await runIsolated(
      `await human.ask({}); for (;;) {}`,
      withHuman(LIMIT * 2),
      limits,
      new AbortController().signal,
    )
    const took = Date.now() - started
    assert.equal(out.error?.code, 'ERR_CODE_LIMIT')
    assert.ok(
      took >= LIMIT * 2 + LIMIT / 2,
      `the loop had most of the limit after the answer (${took} ms)`,
    )
    assert.ok(took < LIMIT * 4, `and no more (${took} ms)`)
  })
})
