/**
 * What a confined server may write and reach under real bubblewrap (issue 29, ADRs 095 and 096):
 * a package writes beside its own code and keeps it across launches while the shared install is
 * untouched; a root-owned granted folder is writable and what the server makes there is root's;
 * a granted folder under /tmp is the host's; a connect grant reaches the real PostgreSQL on
 * 127.0.0.1:5432 by its own protocol, and an ungranted port stays refused. Each is judged outside
 * the sandbox: the file on disk, its owner, the row in the database.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import pg from 'pg'
import { startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { DEFAULT_JSON_LIMITS } from '../../src/protocol/json-limits.ts'
import { hostSideDir, startHostSide, stopHostSide } from '../../src/sandbox/host-side.ts'
import {
  confinedLaunch,
  DEFAULT_SANDBOX_LIMITS,
  type Launch,
  runsAsRoot,
  type SandboxSpec,
  sandboxFacility,
} from '../../src/sandbox/sandbox.ts'
import { type Logger, silentLogger } from '../../src/telemetry/log.ts'
import { StdioOutboundTransport } from '../../src/transports/stdio-outbound.ts'
import { textOf } from '../support/content.ts'

const probe = fileURLToPath(new URL('../fixtures/sandbox-probe.ts', import.meta.url))
const found = sandboxFacility()
const noBwrap = 'missing' in found ? `no bubblewrap here: ${found.missing}` : false

/** Runs `launch` to its end; its stdout's last line. */
function run(launch: Launch): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(launch.command, [...launch.args], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...launch.env },
    })
    const filter = child.stdio[3] as NodeJS.WritableStream
    filter.on('error', () => {})
    filter.end(launch.seccomp ?? Buffer.alloc(0))
    let out = ''
    let err = ''
    child.stdout!.on('data', (d: Buffer) => {
      out += d
    })
    child.stderr!.on('data', (d: Buffer) => {
      err += d
    })
    child.once('error', reject)
    child.once('close', (code) => {
      const line = out.trim().split('\n').at(-1) ?? ''
      if (line === '') reject(new Error(`no output (exit ${code}): ${err}`))
      else resolve(line)
    })
  })
}

describe('grants under real bubblewrap', { skip: noBwrap }, () => {
  let dir: string
  const spec = (name: string, extra: Partial<SandboxSpec> = {}): SandboxSpec => ({
    stateDir: join(dir, 'state', name),
    read: [],
    write: [],
    protect: [],
    limits: DEFAULT_SANDBOX_LIMITS,
    ...extra,
  })
  const env = { PATH: '/usr/bin:/bin' }

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-grants-')))
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  test('a package writes beside its code, keeps it across launches; the install is untouched', async () => {
    const pkg = join(dir, 'install/node_modules/probe-pkg')
    mkdirSync(join(pkg, 'dist'), { recursive: true })
    writeFileSync(join(pkg, 'package.json'), '{"name":"probe-pkg","version":"1.0.0"}')
    // As server-memory does: its data file is next to its own dist/index.js.
    writeFileSync(
      join(pkg, 'dist/index.mjs'),
      "import { appendFileSync, readFileSync } from 'node:fs'\n" +
        "const file = new URL('./memory.jsonl', import.meta.url)\n" +
        "appendFileSync(file, process.argv[2] + '\\n')\n" +
        "console.log('ok ' + readFileSync(file, 'utf8').trim().split('\\n').join(','))\n",
    )
    const launch = (word: string) =>
      confinedLaunch(
        'layer',
        { command: process.execPath, args: [join(pkg, 'dist/index.mjs'), word], env },
        spec('layer'),
        found,
      )
    assert.equal(await run(launch('first')), 'ok first')
    // A gateway restart is a new launch of the same upstream: what it wrote is still there.
    assert.equal(await run(launch('second')), 'ok first,second')
    assert.equal(existsSync(join(pkg, 'dist/memory.jsonl')), false, 'the install is untouched')
    // An upgrade in place reaches the copy: the install's changed file wins.
    writeFileSync(
      join(pkg, 'dist/index.mjs'),
      "console.log('ok upgraded')\n// a different size, so a different file\n",
    )
    assert.equal(await run(launch('third')), 'ok upgraded')
  })

  test('a root-owned granted folder is writable, and what is made there is root-owned', {
    skip: runsAsRoot() ? false : 'Barbican does not run as root here',
  }, async () => {
    const data = join(dir, 'root-data')
    mkdirSync(data, { mode: 0o700 })
    writeFileSync(join(data, 'kept.txt'), 'before\n', { mode: 0o644 })
    const launch = (file: string) =>
      confinedLaunch(
        'rootgrant',
        { command: process.execPath, args: [probe, 'append', file, 'from-sandbox'], env },
        spec('rootgrant', { write: [data] }),
        found,
      )
    assert.equal(await run(launch(join(data, 'new.txt'))), 'ok from-sandbox')
    assert.equal(await run(launch(join(data, 'kept.txt'))), 'ok before,from-sandbox')
    assert.equal(statSync(join(data, 'new.txt')).uid, 0, 'root-owned on the host')
    assert.equal(statSync(data).uid, 0, 'the folder was not chowned')
    assert.equal(statSync(join(data, 'kept.txt')).uid, 0)
  })

  test('a root-owned granted folder that holds its state directory: both stay writable', {
    skip: runsAsRoot() ? false : 'Barbican does not run as root here',
  }, async () => {
    // The config's own folder granted (MEMORY_FILE_PATH beside the config), with the state
    // directory in its .barbican/: through the idmap the state directory's owner (the sandbox
    // uid) would be unmapped, and bwrap could not even enter it to bind the package layer.
    const project = join(dir, 'project')
    mkdirSync(project, { mode: 0o755 })
    const stateDir = join(project, '.barbican/state/inproject')
    const launch = (file: string, word: string) =>
      confinedLaunch(
        'inproject',
        { command: process.execPath, args: [probe, 'append', file, word], env },
        spec('inproject', { stateDir, write: [project] }),
        found,
      )
    assert.equal(await run(launch(join(project, 'memory.jsonl'), 'data')), 'ok data')
    assert.equal(await run(launch(join(stateDir, 'home.txt'), 'state')), 'ok state')
    assert.equal(statSync(join(project, 'memory.jsonl')).uid, 0, 'root-owned on the host')
    assert.notEqual(statSync(join(stateDir, 'home.txt')).uid, 0, "the state directory's own uid")
  })

  test('its HOME is its state directory, writable; USER and LOGNAME name its uid (ADR 110)', async () => {
    const launch = confinedLaunch(
      'who',
      { command: process.execPath, args: [probe, 'whoami'], env },
      spec('who'),
      found,
    )
    const user = runsAsRoot() ? 'barbican-who' : userInfo().username
    // As root its uid has a line of its own in the sandbox's /etc/passwd, so a lookup by uid
    // (os.userInfo(), whoami, git) finds the same name.
    assert.equal(await run(launch), `ok ${user} ${user} ${user} ${join(dir, 'state', 'who')}`)
    assert.equal(readFileSync(join(dir, 'state', 'who', '.probe'), 'utf8'), 'x')
    // A USER the entry declares is kept.
    const declared = confinedLaunch(
      'who',
      { command: process.execPath, args: [probe, 'whoami'], env: { ...env, USER: 'svc' } },
      spec('who'),
      found,
    )
    assert.match(await run(declared), /^ok svc svc /)
  })

  test('a granted folder under /tmp is the host’s, not the private /tmp', async () => {
    const shared = realpathSync(mkdtempSync('/tmp/barbican-tmp-grant-'))
    try {
      const file = join(shared, 'memory.jsonl')
      const launch = confinedLaunch(
        'tmpgrant',
        { command: process.execPath, args: [probe, 'append', file, 'kept'], env },
        spec('tmpgrant', { write: [shared] }),
        found,
      )
      assert.equal(await run(launch), 'ok kept')
      assert.equal(readFileSync(file, 'utf8'), 'kept\n')
      // A grant that does not exist is not made inside either: the write fails, never vanishes.
      const missing = join(shared, 'absent')
      const lost = confinedLaunch(
        'tmpgrant',
        {
          command: process.execPath,
          args: [probe, 'append', join(missing, 'x'), 'lost'],
          env,
        },
        spec('tmpgrant', { write: [missing] }),
        found,
      )
      assert.equal(await run(lost), 'refused: ENOENT')
    } finally {
      rmSync(shared, { recursive: true, force: true })
    }
  })

  test('a connect grant reaches the real PostgreSQL by its own protocol; other ports stay shut', async () => {
    const word = `probe-${process.pid}-${Date.now()}`
    const grants = spec('pg', {
      connect: [{ host: '127.0.0.1', port: 5432, source: 'arg 1' }],
    })
    const socketDir = hostSideDir()
    const side = await startHostSide(socketDir, {
      upstream: 'pg',
      spec: grants,
      log: silentLogger,
    })
    try {
      const launch = (...args: string[]) =>
        confinedLaunch(
          'pg',
          { command: process.execPath, args: [probe, ...args], env },
          grants,
          found,
          socketDir,
        )
      assert.equal(await run(launch('pg', '127.0.0.1', '5432', word)), `ok inserted ${word}`)
      // Redis listens on the host, but its port was not granted.
      assert.equal(await run(launch('tcp', '127.0.0.1', '6379')), 'refused: ECONNREFUSED')
    } finally {
      stopHostSide(socketDir, side)
    }
    const client = new pg.Client({
      host: '127.0.0.1',
      port: 5432,
      user: 'postgres',
      database: 'test',
    })
    await client.connect()
    try {
      const rows = await client.query('SELECT v FROM sandbox_probe WHERE v = $1', [word])
      assert.equal(rows.rowCount, 1, 'the row is in the database')
      await client.query('DELETE FROM sandbox_probe WHERE v = $1', [word])
    } finally {
      await client.end()
    }
  })

  test('a grant naming localhost reaches the loopback port of the host (Redis)', async () => {
    const grants = spec('named', {
      connect: [{ host: 'localhost', port: 6379, source: 'env REDIS_URL' }],
    })
    const socketDir = hostSideDir()
    const side = await startHostSide(socketDir, {
      upstream: 'named',
      spec: grants,
      log: silentLogger,
    })
    try {
      const launch = confinedLaunch(
        'named',
        { command: process.execPath, args: [probe, 'tcp', 'localhost', '6379'], env },
        grants,
        found,
        socketDir,
      )
      assert.equal(await run(launch), 'ok connected')
    } finally {
      stopHostSide(socketDir, side)
    }
  })
})

describe('server-memory through the gateway, confined, without MEMORY_FILE_PATH', {
  skip: noBwrap,
}, () => {
  const root = fileURLToPath(new URL('../../', import.meta.url))
  const memory = realpathSync(
    join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js'),
  )
  let configDir: string

  before(() => {
    configDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-memory-')))
  })
  after(() => rmSync(configDir, { recursive: true, force: true }))

  /** Starts the gateway, runs `use` with a client, stops the gateway. */
  async function withGateway(use: (client: Client) => Promise<void>): Promise<void> {
    const file = join(configDir, 'barbican.json')
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { memory: { command: process.execPath, args: [memory] } },
    })
    writeFileSync(file, text)
    const { config } = parseConfigText(text, { file })
    const server = await startServer(config, silentLogger)
    const client = new Client({ name: 'memory-test', version: '1.0.0' })
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
      await use(client)
    } finally {
      await client.close()
      await server.stop()
    }
  }

  test('saves beside its dist/ and finds it again after a gateway restart', async () => {
    const entity = `sandbox-${process.pid}`
    await withGateway(async (client) => {
      const made = await client.callTool({
        name: 'create_entities',
        arguments: { entities: [{ name: entity, entityType: 'test', observations: ['kept'] }] },
      })
      assert.notEqual(made.isError, true, textOf(made))
    })
    await withGateway(async (client) => {
      const graph = textOf(await client.callTool({ name: 'read_graph', arguments: {} }))
      assert.match(graph, new RegExp(entity), 'the entity survived the restart')
    })
    const saved = join(configDir, '.barbican/state/memory/.barbican-packages')
    assert.ok(existsSync(saved), 'the layer is in the upstream state directory')
    assert.equal(
      existsSync(join(memory, '../memory.jsonl')),
      false,
      'the shared install is untouched',
    )
  })
})

describe('a connect grant through the gateway’s stdio transport', { skip: noBwrap }, () => {
  test('reaches PostgreSQL and logs the connection with the upstream’s name', async () => {
    const stateDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-connect-')))
    const word = `transport-${process.pid}-${Date.now()}`
    const lines: Array<{ msg: string; fields: Record<string, unknown> }> = []
    const record = (msg: string, fields?: Record<string, unknown>) =>
      lines.push({ msg, fields: fields ?? {} })
    const log: Logger = {
      debug() {},
      info: record,
      warn: record,
      error: record,
      child: () => log,
    }
    const transport = new StdioOutboundTransport({
      name: 'pgclient',
      command: process.execPath,
      args: [probe, 'pg', '127.0.0.1', '5432', word],
      log,
      limits: DEFAULT_JSON_LIMITS,
      sandbox: {
        stateDir,
        read: [],
        write: [],
        protect: [],
        limits: DEFAULT_SANDBOX_LIMITS,
        connect: [{ host: '127.0.0.1', port: 5432, source: 'arg 1' }],
      },
    })
    const client = new pg.Client({
      host: '127.0.0.1',
      port: 5432,
      user: 'postgres',
      database: 'test',
    })
    try {
      await transport.start()
      await client.connect()
      let rows = 0
      for (let i = 0; i < 100 && rows === 0; i++) {
        await new Promise((r) => setTimeout(r, 100))
        rows =
          (await client.query('SELECT v FROM sandbox_probe WHERE v = $1', [word]).catch(() => null))
            ?.rowCount ?? 0
      }
      assert.equal(rows, 1, 'the row is in the database')
      const allowed = lines.find((l) => l.msg === 'connect allowed')
      assert.equal(allowed?.fields.upstream, 'pgclient')
      assert.equal(allowed?.fields.port, 5432)
      assert.equal(allowed?.fields.source, 'arg 1')
      await client.query('DELETE FROM sandbox_probe WHERE v = $1', [word])
    } finally {
      await client.end()
      await transport.close()
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})
