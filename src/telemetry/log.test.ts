import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Hush, jsonLogger, redact, stderrFormat } from './log.ts'

describe('log lines of errors', () => {
  test('name every cause of an error, a bounded number deep, even when the chain loops', () => {
    const lines: string[] = []
    const log = jsonLogger({ write: (line) => lines.push(line) })
    const root = new Error('socket closed')
    const middle = new Error('cannot send', { cause: root })
    root.cause = middle // a loop: the chain must still end
    log.warn('request failed', { error: new Error('call failed', { cause: middle }) })
    const { error } = JSON.parse(lines[0]!) as { error: Record<string, unknown> }
    assert.equal(error.message, 'call failed')
    let depth = 0
    for (let e = error; e.cause !== undefined; e = e.cause as Record<string, unknown>) depth++
    assert.equal((error.cause as Record<string, unknown>).message, 'cannot send')
    assert.ok(depth >= 2 && depth <= 6, `followed ${depth} causes`)
  })

  test('redact credentials an error message may quote', () => {
    const text = redact(
      'GET https://ops:hunter2@up.example/x?access_token=t0k&page=2 with Bearer abc.def ' +
        'and key bk_live_123 and eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln',
    )
    for (const secret of ['hunter2', 't0k', 'abc.def', 'bk_live_123', 'eyJhbGciOiJFUzI1NiJ9']) {
      assert.ok(!text.includes(secret), `${secret} left in: ${text}`)
    }
    assert.match(text, /page=2/, 'what is not a credential stays')
  })
})

describe('the one logger', () => {
  const capture = (options: Parameters<typeof jsonLogger>[0] = {}) => {
    const lines: string[] = []
    return { lines, log: jsonLogger({ ...options, write: (line) => lines.push(line) }) }
  }

  test('obeys a level set for its component, and the global level elsewhere', () => {
    const { lines, log } = capture({ level: 'warn', levels: { call: 'debug', upstream: 'error' } })
    log.child({ part: 'call' }).debug('tools/call echo ok')
    log.child({ part: 'upstream', upstream: 'files' }).warn('upstream failed')
    log.child({ part: 'upstream' }).child({ upstream: 'x' }).error('upstream process error')
    log.info('root info')
    log.warn('root warn')
    assert.deepEqual(
      lines.map((l) => (JSON.parse(l) as { msg: string }).msg),
      ['tools/call echo ok', 'upstream process error', 'root warn'],
    )
  })

  test('the gateway component governs lines of no component', () => {
    const { lines, log } = capture({ level: 'info', levels: { gateway: 'error' } })
    log.info('quiet')
    log.child({ part: 'session' }).info('heard')
    assert.deepEqual(
      lines.map((l) => (JSON.parse(l) as { msg: string }).msg),
      ['heard'],
    )
  })

  test('redacts credential-like keys at any depth and configured paths, keeps the rest', () => {
    const { lines, log } = capture({ redact: ['env.*', 'upstreamConfig.headers.x-team'] })
    log.info('launch', {
      env: { GITHUB_PAT: 'ghp_secret1', PLAIN: 'also-hidden' },
      upstreamConfig: { headers: { 'x-team': 'team-secret2', accept: 'json' } },
      request: { headers: { Authorization: 'token abc', 'X-Api-Key': 'k3y' }, client_secret: 'cs' },
      note: 'see https://u:pw4@host/ and Bearer tok5',
      count: 3,
    })
    const line = lines[0]!
    for (const secret of [
      'ghp_secret1',
      'also-hidden',
      'team-secret2',
      'abc',
      'k3y',
      '"cs"',
      'pw4',
      'tok5',
    ]) {
      assert.ok(!line.includes(secret), `${secret} left in: ${line}`)
    }
    const record = JSON.parse(line) as Record<string, Record<string, Record<string, unknown>>>
    assert.equal(record.upstreamConfig?.headers?.accept, 'json')
    assert.equal(record.count, 3 as unknown)
  })

  test('keeps the JSON field names of before: time, level, msg, bound and given fields', () => {
    const { lines, log } = capture()
    log.child({ upstream: 'files' }).warn('upstream failed', { retryInMs: 500 })
    const record = JSON.parse(lines[0]!) as Record<string, unknown>
    assert.deepEqual(Object.keys(record), ['time', 'level', 'msg', 'upstream', 'retryInMs'])
    assert.match(String(record.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  })

  test('writes a readable line for people: time, level, message, key fields, colour', () => {
    const plain = capture({ format: 'pretty' })
    plain.log.child({ upstream: 'files' }).warn('upstream failed', {
      error: new Error('spawn npx ENOENT', { cause: new Error('not on PATH') }),
      retryInMs: 500,
    })
    assert.match(
      plain.lines[0]!,
      /^\d\d:\d\d:\d\d\.\d{3} WARN {2}upstream failed upstream=files error="spawn npx ENOENT ← not on PATH" retryInMs=500\n$/,
    )
    const coloured = capture({ format: 'pretty', color: true })
    coloured.log.error('boom')
    assert.ok(coloured.lines[0]!.includes('\x1b[31mERROR'), 'error in red')
  })

  test('picks readable lines on a terminal and JSON elsewhere; NO_COLOR removes colour', () => {
    assert.deepEqual(stderrFormat('auto', true, {}), { format: 'pretty', color: true })
    assert.deepEqual(stderrFormat('auto', false, {}), { format: 'json', color: false })
    assert.deepEqual(stderrFormat('auto', true, { NO_COLOR: '1' }), {
      format: 'pretty',
      color: false,
    })
    assert.deepEqual(stderrFormat('json', true, {}), { format: 'json', color: false })
    assert.deepEqual(stderrFormat('pretty', false, { FORCE_COLOR: '1' }), {
      format: 'pretty',
      color: true,
    })
  })
})

describe('a hush', () => {
  test('turns info and warn into debug while on, children included; errors stay', () => {
    const lines: string[] = []
    const hush = new Hush()
    const log = hush.wrap(jsonLogger({ level: 'debug', write: (line) => lines.push(line) }))
    const child = log.child({ upstream: 'files' })
    child.warn('before')
    hush.on = true
    child.info('started')
    child.warn('exited')
    child.error('broken')
    hush.on = false
    log.warn('after')
    assert.deepEqual(
      lines.map((l) => {
        const r = JSON.parse(l) as { level: string; msg: string }
        return `${r.level} ${r.msg}`
      }),
      ['warn before', 'debug started', 'debug exited', 'error broken', 'warn after'],
    )
  })
})
