/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, server mode, offline)
 * against Barbican fronting our dual-era fixture upstream, for both requirement sets:
 * `--requirements 2025-11-25` exercises a legacy client through Barbican to a 2026-07-28
 * upstream (Barbican probes the fixture and finds it modern), `--requirements 2026-07-28` a
 * modern client to it. A third run keeps legacy ↔ legacy honest with the fixture pinned legacy.
 *
 * The verdict is ours, not only the CLI's exit code: every scenario the requirement set names
 * must pass, anything else that fails must be listed in expected-failures.<revision>.yaml, and
 * only extensions may be listed there (each with its reason); a listed scenario that passes is
 * a stale entry and fails the test too.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import type { RunningServer } from '../../src/app/server.ts'
import { startFixtureGateway } from './serve-fixture.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const suiteDir = join(root, 'node_modules/@modelcontextprotocol/conformance')
const cli = join(suiteDir, 'dist/index.js')
const RUN_TIMEOUT_MS = 240_000

interface Requirements {
  server: string[]
  not_scored?: { scenario: string; leg: string; reason: string }[]
}

interface Expected {
  server: { scenario: string; reason: string }[]
}

function requirements(revision: string): Requirements {
  return parse(
    readFileSync(join(suiteDir, `requirements/${revision}.yaml`), 'utf8'),
  ) as Requirements
}

function expectedFailures(revision: string): Expected {
  const file = fileURLToPath(new URL(`expected-failures.${revision}.yaml`, import.meta.url))
  return parse(readFileSync(file, 'utf8')) as Expected
}

/** Runs the suite; resolves with scenario → failing check ids (empty: passed). */
async function runSuite(url: string, revision: string): Promise<Map<string, string[]>> {
  const out = mkdtempSync(join(tmpdir(), 'barbican-conformance-'))
  try {
    const child = spawn(
      process.execPath,
      [cli, 'server', '--url', url, '--requirements', revision, '-o', out],
      { cwd: out, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, NO_COLOR: '1' } },
    )
    let stderr = ''
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
        reject(new Error(`the conformance suite did not finish within ${RUN_TIMEOUT_MS} ms`))
      }, RUN_TIMEOUT_MS)
      child.once('exit', () => {
        clearTimeout(timer)
        resolve()
      })
    })
    const results = new Map<string, string[]>()
    for (const dir of readdirSync(out)) {
      const scenario = /^server-(.+)-\d{4}-\d{2}-\d{2}T/.exec(dir)?.[1]
      if (!scenario) continue
      const checks = JSON.parse(readFileSync(join(out, dir, 'checks.json'), 'utf8')) as {
        id: string
        status: string
      }[]
      results.set(
        scenario,
        checks.filter((c) => c.status === 'FAILURE').map((c) => c.id),
      )
    }
    assert.ok(results.size > 0, `the suite produced no results: ${stderr.slice(0, 2000)}`)
    return results
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
}

function judge(revision: string, results: Map<string, string[]>): void {
  const required = requirements(revision)
  const extensions = new Set(
    (required.not_scored ?? [])
      .filter((n) => n.leg === 'server' && n.reason === 'extension')
      .map((n) => n.scenario),
  )
  const expected = expectedFailures(revision).server ?? []
  for (const entry of expected) {
    assert.ok(extensions.has(entry.scenario), `${entry.scenario} is not an extension`)
    assert.ok(entry.reason?.trim(), `${entry.scenario} needs a written reason`)
  }
  const allowed = new Set(expected.map((e) => e.scenario))
  for (const scenario of required.server) {
    assert.deepEqual(results.get(scenario), [], `required scenario ${scenario} must pass`)
  }
  const unexpected = [...results].filter(([s, failed]) => failed.length > 0 && !allowed.has(s))
  assert.deepEqual(unexpected, [], 'scenarios failing without an expected-failures entry')
  const stale = expected.filter((e) => results.get(e.scenario)?.length === 0)
  assert.deepEqual(stale, [], 'expected failures that now pass (remove them)')
}

/**
 * Client-mode scenarios that apply to Barbican's upstream-facing client. The suite's auth/*
 * client scenarios are left out: they test an OAuth client obtaining tokens for the upstream,
 * which is the outbound-credentials feature, not the bridge.
 */
const CLIENT_SCENARIOS: Readonly<Record<string, readonly string[]>> = {
  '2025-11-25': ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry'],
  '2026-07-28': [
    'tools_call',
    'request-metadata',
    'sep-2322-client-request-state',
    'http-standard-headers',
    'http-custom-headers',
    'http-invalid-tool-headers',
    'json-schema-ref-no-deref',
  ],
}

const driver = fileURLToPath(new URL('client-driver.ts', import.meta.url))

/** Runs one client scenario with Barbican as the client; resolves with its failing check ids. */
async function runClientScenario(scenario: string, revision: string): Promise<string[]> {
  const out = mkdtempSync(join(tmpdir(), 'barbican-conformance-client-'))
  try {
    const args = [cli, 'client', '--command', `${process.execPath} ${driver}`, '--scenario']
    args.push(scenario, '--spec-version', revision, '--timeout', '30000', '-o', out)
    const child = spawn(process.execPath, args, { cwd: out, stdio: 'ignore' })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
        reject(new Error(`client scenario ${scenario} did not finish`))
      }, 60_000)
      child.once('exit', () => {
        clearTimeout(timer)
        resolve()
      })
    })
    const [dir] = readdirSync(out)
    assert.ok(dir, `client scenario ${scenario} produced no results`)
    const checks = JSON.parse(readFileSync(join(out, dir, 'checks.json'), 'utf8')) as {
      id: string
      status: string
    }[]
    assert.ok(checks.length > 0, `client scenario ${scenario} ran no checks`)
    return checks.filter((c) => c.status === 'FAILURE').map((c) => c.id)
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
}

const gateways: RunningServer[] = []
after(async () => {
  await Promise.all(gateways.map((g) => g.stop()))
})

async function gateway(era: string): Promise<string> {
  const server = await startFixtureGateway(era)
  gateways.push(server)
  return `${server.url}/mcp`
}

describe('the official conformance suite against Barbican', { timeout: 600_000 }, () => {
  test('a 2026-07-28 client through Barbican to a 2026-07-28 upstream meets --requirements 2026-07-28', async () => {
    judge('2026-07-28', await runSuite(await gateway('dual'), '2026-07-28'))
  })

  test('a 2025-11-25 client through Barbican to a 2026-07-28 upstream meets --requirements 2025-11-25', async () => {
    judge('2025-11-25', await runSuite(await gateway('dual'), '2025-11-25'))
  })

  test('a 2025-11-25 client through Barbican to a 2025-11-25 upstream meets --requirements 2025-11-25', async () => {
    judge('2025-11-25', await runSuite(await gateway('legacy'), '2025-11-25'))
  })
})

describe('the official conformance suite against Barbican as a client', {
  timeout: 600_000,
}, () => {
  for (const [revision, scenarios] of Object.entries(CLIENT_SCENARIOS)) {
    for (const scenario of scenarios) {
      test(`Barbican's upstream-facing client passes the ${revision} client scenario ${scenario}`, async () => {
        assert.deepEqual(await runClientScenario(scenario, revision), [])
      })
    }
  }
})
