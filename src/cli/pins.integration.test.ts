import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { runCli as run } from '../../test/support/cli.ts'
import { openSqliteStore } from '../store/sqlite.ts'
import { silentLogger } from '../telemetry/log.ts'
import { TrustGuard } from '../trust/trust-guard.ts'

const repo = fileURLToPath(new URL('../../', import.meta.url))
const memoryServer = join(repo, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')
const root = mkdtempSync(join(tmpdir(), 'barbican-pins-'))
after(() => rmSync(root, { recursive: true, force: true }))
let n = 0

/** A config folder with one stdio upstream running the official memory server. */
function configDir(env: Record<string, string> = {}): { dir: string; file: string } {
  const dir = join(root, `c${n++}`)
  mkdirSync(dir)
  const file = join(dir, 'barbican.json')
  writeConfig(file, env)
  return { dir, file }
}

function writeConfig(file: string, env: Record<string, string>, extraArgs: string[] = []) {
  writeFileSync(
    file,
    JSON.stringify({
      upstreams: {
        memory: {
          command: process.execPath,
          args: [memoryServer, ...extraArgs],
          env: { MEMORY_FILE_PATH: join(root, 'memory.jsonl'), ...env },
        },
      },
    }),
  )
}

describe('barbican pins', () => {
  test('lists a quarantined change, shows it field by field, and approves it with its author', async () => {
    const { dir, file } = configDir()
    const store = await openSqliteStore(join(dir, '.barbican', 'barbican.db'))
    const guard = new TrustGuard({ store: store.pins, log: silentLogger })
    const lists = (description: string) => ({
      upstream: 'memory',
      lists: {
        tools: [{ name: 'read_graph', description, inputSchema: { type: 'object' } }],
        prompts: [],
        resourceTemplates: [],
      },
    })
    await guard.review([lists('Reads the graph.')])
    const verdict = await guard.review([lists('Reads the graph and posts it.')])
    assert.equal(verdict.quarantined.get('memory')?.has('tool:read_graph'), true)
    await store.close()

    const listed = await run(['pins', 'list', '--config', file])
    assert.equal(listed.code, 0, listed.stderr)
    assert.match(listed.stdout, /pinned {3}memory: 1 item\(s\)/)
    assert.match(listed.stdout, /pending {2}memory tool:read_graph {2}changed \(description\)/)

    const diff = await run(['pins', 'diff', 'memory', '--config', file])
    assert.match(diff.stdout, /description: "Reads the graph\." → "Reads the graph and posts it\."/)

    const approved = await run([
      'pins',
      'approve',
      'memory',
      'tool:read_graph',
      '--as',
      'alice',
      '--config',
      file,
    ])
    assert.equal(approved.code, 0, approved.stderr)
    const history = await run(['pins', 'history', 'memory', '--config', file])
    assert.match(history.stdout, /memory tool:read_graph approved by alice/)
    assert.match((await run(['pins', 'list', '--config', file])).stdout, /no pending changes/)
    // The decision is an administrative act in the audit log, which still verifies.
    const audit = await run(['audit', 'query', '--config', file, '--subject', 'alice'])
    assert.equal(audit.code, 0, audit.stderr)
    const records = audit.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    assert.deepEqual(
      records.map((r) => [r.type, r.action, r.upstream, r.target, r.outcome]),
      [['admin', 'pin.approve', 'memory', 'tool:read_graph', 'ok']],
    )
    const verified = await run(['audit', 'verify', '--config', file])
    assert.equal(verified.code, 0, verified.stdout)
  })

  test('shows a hostile item name escaped, never as raw escape sequences', async () => {
    const { dir, file } = configDir()
    const store = await openSqliteStore(join(dir, '.barbican', 'barbican.db'))
    const guard = new TrustGuard({ store: store.pins, log: silentLogger })
    const name = 'red\u001b[31m\u0007text'
    const lists = (description: string) => ({
      upstream: 'memory',
      lists: {
        tools: [{ name, description, inputSchema: { type: 'object' } }],
        prompts: [],
        resourceTemplates: [],
      },
    })
    await guard.review([lists('One.')])
    await guard.review([lists('Two.')])
    await store.close()
    const printable = 'tool:red\\u{1b}[31m\\u{7}text'
    const outputs = [
      (await run(['pins', 'list', '--config', file])).stdout,
      (await run(['pins', 'diff', 'memory', '--config', file])).stdout,
      (await run(['pins', 'approve', 'memory', '--all', '--as', 'ops', '--config', file])).stdout,
      (await run(['pins', 'history', 'memory', '--config', file])).stdout,
    ]
    for (const out of outputs) {
      assert.ok(out.includes(printable), out)
      assert.ok(!out.includes('\u001b') && !out.includes('\u0007'), JSON.stringify(out))
    }
  })

  test('refuses approve without a key unless --all is given', async () => {
    const { file } = configDir()
    const { code, stderr } = await run(['pins', 'approve', 'memory', '--config', file])
    assert.equal(code, 2)
    assert.match(stderr, /needs UPSTREAM KEY/)
  })
})

describe('barbican check and lock', () => {
  test('check reports drift from the approved baseline, a rotated secret by hash only', async () => {
    const { file } = configDir({ TOKEN: 'first-secret' })
    assert.equal((await run(['pins', 'baseline', '--as', 'ops', '--config', file])).code, 0)
    const same = await run(['check', '--config', file])
    assert.equal(same.code, 0, same.stdout)
    assert.match(same.stdout, /ok {4}configuration matches the baseline/)

    writeConfig(file, { TOKEN: 'second-secret' }, ['--extra'])
    const drifted = await run(['check', '--config', file])
    assert.equal(drifted.code, 1)
    assert.match(drifted.stdout, /DRIFT configuration differs from the baseline approved .* by ops/)
    assert.match(drifted.stdout, /upstreams\.memory\.args: .* → .*"--extra"\]/)
    assert.match(
      drifted.stdout,
      /upstreams\.memory\.env\.TOKEN: "sha256:[0-9a-f]{16}" → "sha256:[0-9a-f]{16}"/,
    )
    assert.doesNotMatch(drifted.stdout, /secret/)
  })

  test('lock pins the script an upstream runs, and a lockfile mismatch prevents the launch', async () => {
    const { dir, file } = configDir()
    const locked = await run(['lock', '--config', file])
    assert.equal(locked.code, 0, locked.stdout + locked.stderr)
    assert.match(locked.stdout, /locked {2}memory: .*index\.js \(added\)/)
    assert.equal((await run(['check', '--config', file])).code, 0)

    const lockPath = join(dir, 'barbican.lock')
    const lock = JSON.parse(readFileSync(lockPath, 'utf8'))
    const actual = lock.upstreams.memory.files
    lock.upstreams.memory.files = 'sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='
    writeFileSync(lockPath, JSON.stringify(lock))
    const refused = await run(['check', '--config', file])
    assert.equal(refused.code, 1)
    assert.ok(
      refused.stdout.includes(
        `FAIL  memory: upstream "memory": launch refused: script ${memoryServer} does not match barbican.lock: files expected sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=, found ${actual}`,
      ),
      refused.stdout,
    )
  })
})

describe('trust.allowInlineCode', () => {
  /** The memory server started behind a `data:` import, which no lockfile can pin. */
  function inlineConfig(trust: Record<string, unknown> | undefined) {
    const dir = join(root, `c${n++}`)
    mkdirSync(dir)
    const file = join(dir, 'barbican.json')
    writeFileSync(
      file,
      JSON.stringify({
        upstreams: {
          memory: {
            command: process.execPath,
            args: ['--import=data:text/javascript,globalThis.x=1', memoryServer],
            env: { MEMORY_FILE_PATH: join(root, 'memory.jsonl') },
            ...(trust === undefined ? {} : { trust }),
          },
        },
      }),
    )
    return file
  }

  test('refuses the launch by default and names the key that allows it', async () => {
    const refused = await run(['check', '--config', inlineConfig(undefined)])
    assert.equal(refused.code, 1)
    assert.match(
      refused.stdout,
      /FAIL {2}memory: upstream "memory": launch refused: node --import data: loads code given on the command line, which barbican\.lock cannot pin; launch a script file or a package, or set trust\.allowInlineCode: true/,
    )
  })

  test('launches it when the upstream allows it, and `barbican lock` skips it', async () => {
    const file = inlineConfig({ allowInlineCode: true })
    const checked = await run(['check', '--config', file])
    assert.equal(checked.code, 0, checked.stdout + checked.stderr)
    const locked = await run(['lock', '--config', file])
    assert.equal(locked.code, 0, locked.stdout + locked.stderr)
    assert.match(
      locked.stdout,
      /skipped memory: node --import data: loads code given on the command line, which cannot be locked/,
    )
  })
})
