/**
 * A confined `npx PACKAGE@VERSION` whose package is not installed (issue 16, ADR 043,
 * docs/sandbox.md): Barbican installs it outside the sandbox into its own package cache
 * (`.barbican/npm` beside the config), without install scripts, and runs it inside with no
 * network; `barbican lock` pins what it installed, the next start verifies it against
 * barbican.lock, and a package edited in the cache is refused. The real server-memory package,
 * at the exact version of the devDependency, from the npm registry (or npm's own cache).
 */
import assert from 'node:assert/strict'
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { findExecutable } from '../../src/sandbox/sandbox.ts'
import { memoryStore } from '../../src/store/memory.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { runCli } from '../support/cli.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const PACKAGE = '@modelcontextprotocol/server-memory'
const { version } = JSON.parse(
  readFileSync(join(root, 'node_modules', PACKAGE, 'package.json'), 'utf8'),
) as { version: string }

describe('a confined npx package that is not installed', () => {
  let dir: string
  let file: string
  let slot: string

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-npx-install-')))
    // Its working directory is bound into the sandbox: as root, the server's own uid must be
    // able to cross it (docs/sandbox.md, "Root"), as for any config folder but mkdtemp's 0700.
    chmodSync(dir, 0o755)
    file = join(dir, 'barbican.json')
    slot = join(dir, '.barbican/npm', `${PACKAGE.replace('/', '+')}@${version}`)
    writeFileSync(
      file,
      JSON.stringify({
        listen: '127.0.0.1:0',
        upstreams: {
          memory: {
            command: 'npx',
            args: ['-y', `${PACKAGE}@${version}`],
            cwd: dir,
            // Its own HOME: no npx cache of the operator's can supply the package.
            env: {
              HOME: dir,
              MEMORY_FILE_PATH: join(dir, '.barbican/state/memory/memory.jsonl'),
            },
          },
        },
      }),
    )
  })

  after(() => rmSync(dir, { recursive: true, force: true }))

  /** Starts the gateway on the config, with barbican.lock checked when it exists. */
  async function start(): Promise<RunningServer> {
    const { config } = parseConfigText(readFileSync(file, 'utf8'), { file })
    return await startServer(config, silentLogger, {
      store: memoryStore(),
      lockfilePath: join(dir, 'barbican.lock'),
    })
  }

  async function readGraph(server: RunningServer): Promise<string> {
    await server.started
    const memory = server.gateway.status().find((u) => u.name === 'memory')
    assert.equal(memory?.state, 'ready', memory?.error)
    const client = new Client({ name: 'npx-install', version: '1.0.0' })
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
      await client.callTool({
        name: 'create_entities',
        arguments: { entities: [{ name: 'ada', entityType: 'person', observations: ['x'] }] },
      })
      return textOf(await client.callTool({ name: 'read_graph', arguments: {} }))
    } finally {
      await client.close()
    }
  }

  test('is installed outside the sandbox at start, then runs confined', async () => {
    assert.equal(existsSync(slot), false)
    const server = await start()
    try {
      assert.match(await readGraph(server), /ada/)
    } finally {
      await server.stop()
    }
    const installed = JSON.parse(
      readFileSync(join(slot, 'node_modules', PACKAGE, 'package.json'), 'utf8'),
    ) as { version: string }
    assert.equal(installed.version, version)
    // The install left a lock with the registry's integrity, which barbican.lock will carry.
    assert.ok(existsSync(join(slot, 'package-lock.json')))
    assert.ok(existsSync(join(dir, '.barbican/state/memory/memory.jsonl')), 'state kept outside')
  })

  test('barbican lock pins the cached package; the next start verifies it', async () => {
    const lock = await runCli(['lock', '--config', file])
    assert.equal(lock.code, 0, lock.stderr + lock.stdout)
    const entry = (
      JSON.parse(readFileSync(join(dir, 'barbican.lock'), 'utf8')) as {
        upstreams: Record<string, { package: string; version: string; integrity?: string }>
      }
    ).upstreams.memory
    assert.equal(entry?.package, PACKAGE)
    assert.equal(entry?.version, version)
    assert.match(entry?.integrity ?? '', /^sha512-/)
    const server = await start()
    try {
      assert.match(await readGraph(server), /ada/)
    } finally {
      await server.stop()
    }
  })

  test('a package edited in the cache is refused at launch', async () => {
    const manifest = join(slot, 'node_modules', PACKAGE, 'package.json')
    appendFileSync(manifest, '\n')
    const server = await start()
    try {
      await server.started
      const status = server.gateway.status()
      const memory = status.find((u) => u.name === 'memory')
      assert.equal(memory?.state, 'failed')
      assert.match(String(memory?.error), /launch refused: .*barbican\.lock/)
    } finally {
      await server.stop()
    }
  })
})

describe('a confined uvx launch', () => {
  test('is refused, naming uv, on a host without uv', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-uvx-')))
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { fetch: { command: 'uvx', args: ['mcp-server-fetch==2025.4.7'], cwd: dir } },
    })
    const { config } = parseConfigText(text, { file: join(dir, 'barbican.json') })
    const server = await startServer(config, silentLogger)
    try {
      await server.started
      const fetch = server.gateway.status().find((u) => u.name === 'fetch')
      assert.equal(fetch?.state, 'failed')
      if (findExecutable('uv') === undefined) {
        assert.match(String(fetch?.error), /confined uvx launch .* this host has no uv/)
      } else {
        // With uv, it runs from uv's cache, with no network: this package is not in it here.
        assert.doesNotMatch(String(fetch?.error), /has no uv/)
      }
    } finally {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
