import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { runCli as run } from '../../test/support/cli.ts'
import { startServer } from '../app/server.ts'
import { loadConfig } from '../config/load.ts'
import { openSqliteStore } from '../store/sqlite.ts'
import { silentLogger } from '../telemetry/log.ts'
import { canonicalHash } from '../trust/canonical.ts'

const repo = fileURLToPath(new URL('../../', import.meta.url))
const memoryServer = join(repo, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')
const root = mkdtempSync(join(tmpdir(), 'barbican-check-'))
after(() => rmSync(root, { recursive: true, force: true }))

describe('barbican check --pins', () => {
  test('passes while the upstream matches its pins and fails with the diff once it does not', async () => {
    const dir = join(root, 'c')
    mkdirSync(dir)
    const file = join(dir, 'barbican.json')
    writeFileSync(
      file,
      JSON.stringify({
        listen: '127.0.0.1:0',
        upstreams: {
          memory: {
            command: process.execPath,
            args: [memoryServer],
            env: { MEMORY_FILE_PATH: join(root, 'memory.jsonl') },
          },
        },
      }),
    )
    const none = await run(['check', '--pins', '--config', file])
    assert.equal(none.code, 1)
    assert.match(
      none.stdout,
      /FAIL {2}--pins: .*barbican\.db does not exist, so no pin is approved/,
    )

    // A gateway run pins what it sees first (trust on first use), as `serve` does.
    const dbPath = join(dir, '.barbican', 'barbican.db')
    const loaded = await loadConfig({ path: file })
    assert.ok(loaded)
    const store = await openSqliteStore(dbPath)
    const server = await startServer(loaded.config, silentLogger, { store })
    await server.started
    await server.gateway.servers.get('default')?.catalog()
    await server.stop()
    await store.close()

    const same = await run(['check', '--pins', '--config', file])
    assert.equal(same.code, 0, same.stdout + same.stderr)
    assert.match(same.stdout, /^ok {4}memory: every item matches its approved pin$/m)

    // The approved definition differs from what the server offers now: a rug pull, seen from
    // the other side. A second tool loses its pin: offered but never approved.
    const pins = await openSqliteStore(dbPath)
    const pinned = await pins.pins.pinned('memory')
    const readGraph = pinned.find((p) => p.key === 'tool:read_graph')
    assert.ok(readGraph)
    const offered = (readGraph.definition as { description: string }).description
    const approved = { ...(readGraph.definition as object), description: 'Approved description.' }
    await pins.pins.pin({ ...readGraph, definition: approved, hash: canonicalHash(approved) })
    await pins.pins.unpin('memory', 'tool:search_nodes')
    await pins.close()

    const drifted = await run(['check', '--pins', '--config', file])
    assert.equal(drifted.code, 1, drifted.stdout)
    assert.match(drifted.stdout, /^PINS {2}memory: 2 item\(s\) differ from the approved pins$/m)
    assert.match(drifted.stdout, /^ {2}changed since approved: tool:read_graph$/m)
    assert.ok(
      drifted.stdout.includes(
        `    description: "Approved description." → ${JSON.stringify(offered)}\n`,
      ),
      drifted.stdout,
    )
    assert.match(drifted.stdout, /^ {2}never approved: tool:search_nodes$/m)
    assert.match(drifted.stdout, /^ {4}name: \(absent\) → "search_nodes"$/m)
    assert.match(drifted.stderr, /1 upstream\(s\) differ from their approved pins/)

    // Without --pins, check still only tries the upstreams.
    assert.equal((await run(['check', '--config', file])).code, 0)
  })
})

describe('barbican check token accounting', () => {
  const configWith = (name: string, server: Record<string, unknown>) => {
    const file = join(root, `${name}.json`)
    writeFileSync(
      file,
      JSON.stringify({
        listen: '127.0.0.1:0',
        upstreams: {
          memory: {
            command: process.execPath,
            args: [memoryServer],
            env: { MEMORY_FILE_PATH: join(root, `${name}.jsonl`) },
          },
        },
        servers: { default: server },
      }),
    )
    return file
  }

  test("prints each server's total in o200k_base tokens and its costliest tools", async () => {
    const file = configWith('tokens', { tools: { include: ['read_graph', 'search_nodes'] } })
    const { code, stdout, stderr } = await run(['check', '--config', file])
    assert.equal(code, 0, stdout + stderr)
    const total = /^ok {4}server default: 2 tool\(s\) cost (\d+) tokens \(o200k_base\)$/m.exec(
      stdout,
    )
    assert.ok(total, stdout)
    const costs =
      /^ {6}costliest: (read_graph|search_nodes) (\d+), (read_graph|search_nodes) (\d+)$/m.exec(
        stdout,
      )
    assert.ok(costs, stdout)
    assert.equal(Number(costs[2]) + Number(costs[4]), Number(total[1]))
    assert.ok(Number(costs[2]) >= Number(costs[4]))
  })

  test('warns over the budget and still passes', async () => {
    const file = configWith('budget', { tokenBudget: 50 })
    const { code, stdout, stderr } = await run(['check', '--config', file])
    assert.equal(code, 0, stdout + stderr)
    assert.match(
      stdout,
      /^warn {2}virtual server "default" lists tools worth \d+ tokens \(o200k_base\), over its tokenBudget of 50;/m,
    )
    const within = await run(['check', '--config', configWith('roomy', { tokenBudget: 1_000_000 })])
    assert.match(
      within.stdout,
      /^ok {4}server default: \d+ tool\(s\) cost \d+ tokens \(o200k_base\), within its budget of 1000000$/m,
    )
  })
})
