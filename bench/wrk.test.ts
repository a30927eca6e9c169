import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, startBarbican } from './processes.ts'
import { parseWrkOutput, startWrk, WRK, wrkScript } from './wrk.ts'

const LIGHT = join(ROOT, 'bench/fixtures/light-echo.ts')

test('the script sends the 2026 call with its routing headers, and the result line parses', () => {
  const script = wrkScript({
    url: 'http://127.0.0.1:1/mcp',
    stateful: false,
    stateless2026: true,
    headers: { authorization: 'Bearer k' },
  })
  assert.match(script, /wrk\.method = "POST"/)
  assert.match(script, /^wrk\.headers\["mcp-method"\] = "tools\/call"$/m)
  assert.match(script, /^wrk\.headers\["mcp-name"\] = "echo"$/m)
  assert.match(script, /^wrk\.headers\["mcp-protocol-version"\] = "2026-07-28"$/m)
  assert.match(script, /^wrk\.headers\["authorization"\] = "Bearer k"$/m)
  assert.match(script, /^wrk\.headers\["accept"\] = "application\/json, text\/event-stream"$/m)
  // The body's quotes are escaped for Lua.
  assert.match(script, /^wrk\.body = "\{\\"jsonrpc\\":\\"2\.0\\".*\\"method\\":\\"tools\/call\\"/m)
  const parsed = parseWrkOutput(
    'Running 1s test\nwrk-result 1200 1001234 3 1 450 2900 7\nwrk-first-failure 400 {"error":1}\n',
  )
  assert.deepEqual(parsed, {
    requests: 1200,
    failures: 3,
    firstFailure: '400 {"error":1}',
    socketErrors: 1,
    elapsedMs: 1001.234,
    p50Ms: 0.45,
    p99Ms: 2.9,
    cpuUs: 70_000,
  })
  assert.throws(() => parseWrkOutput('unable to connect'), /no result/)
})

test('wrk drives a 2026 gateway: echoes count as successes, HTTP errors as failures', async () => {
  assert.ok(WRK, 'wrk is installed')
  const gateway = await startBarbican('wrk-test', { stdio: true, script: LIGHT }, [], ROOT, false, {
    stateless2026: true,
  })
  const dir = mkdtempSync(join(tmpdir(), 'barbican-wrk-test-'))
  try {
    const good = join(dir, 'good.lua')
    // A header with a quote and a backslash: the script must still load in wrk's Lua.
    writeFileSync(good, wrkScript({ ...gateway.target, headers: { 'x-bench': 'a"b\\c' } }))
    const ok = await startWrk(gateway.target, { connections: 4, seconds: 1, scriptPath: good })
      .result
    assert.ok(ok.requests > 50, `requests ${ok.requests}`)
    assert.equal(ok.failures, 0, ok.firstFailure)
    assert.equal(ok.socketErrors, 0)
    assert.ok(ok.p50Ms > 0 && ok.p99Ms >= ok.p50Ms, JSON.stringify(ok))
    // wrk read its own CPU time: some, and no more than its second of wall time.
    assert.ok(ok.cpuUs > 0 && ok.cpuUs <= 1_100_000, `wrk CPU ${ok.cpuUs} µs`)

    // Another path: the gateway answers every request with an HTTP error.
    const elsewhere = { ...gateway.target, url: gateway.target.url.replace(/\/mcp$/, '/nowhere') }
    const bad = join(dir, 'bad.lua')
    writeFileSync(bad, wrkScript(elsewhere))
    const refused = await startWrk(elsewhere, {
      connections: 2,
      seconds: 1,
      scriptPath: bad,
      cpu: 0,
    }).result
    assert.ok(refused.requests > 0)
    assert.equal(refused.failures, refused.requests, refused.firstFailure)
    assert.match(refused.firstFailure, /^4\d\d /)
  } finally {
    rmSync(dir, { recursive: true, force: true })
    await gateway.stop()
  }
})
