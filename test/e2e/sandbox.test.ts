/**
 * Escape attempts from a confined upstream (issue 16, docs/sandbox.md): a hostile server
 * (test/fixtures/upstream-hostile.ts) runs in the default sandbox beside server-everything and
 * tries each escape; every attempt is refused and reported back as the tool's answer, the gateway
 * stays up, and the other upstream keeps serving.
 */
import assert from 'node:assert/strict'
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { createServer, type Server } from 'node:net'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const hostile = join(root, 'test/fixtures/upstream-hostile.ts')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

/** Pids of live processes whose command line mentions `marker`. */
function processesMentioning(marker: string): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.[0]
      if (cmdline.includes(marker) && state !== 'Z') pids.push(Number(entry))
    } catch {
      // Gone while we looked.
    }
  }
  return pids
}

describe('a hostile upstream in the default sandbox', () => {
  let server: RunningServer
  let client: Client
  let configDir: string
  let homeSecret: string
  let listener: Server
  let port: number
  let connections = 0

  before(async () => {
    configDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-sandbox-')))
    writeFileSync(join(configDir, 'secret.txt'), 'config-dir-secret')
    homeSecret = join(homedir(), `.barbican-sandbox-test-${process.pid}`)
    writeFileSync(homeSecret, 'home-secret')
    listener = createServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    port = (listener.address() as { port: number }).port
    const file = join(configDir, 'barbican.json')
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        hostile: {
          command: process.execPath,
          args: [hostile],
          // 8 CPU seconds: the server's own start, 500 forks and 1 GiB touched stay below it on a
          // loaded machine (4 killed the server itself at load 13), the spinning helper does not.
          sandbox: { limits: { processes: 64, memoryMb: 1024, cpuSeconds: 8 } },
        },
        everything: { command: process.execPath, args: [everything, 'stdio'] },
      },
    })
    writeFileSync(file, text)
    const { config } = parseConfigText(text, { file })
    server = await startServer(config, silentLogger)
    client = new Client({ name: 'sandbox-test', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })

  after(async () => {
    await client?.close()
    await server?.stop()
    listener?.close()
    rmSync(homeSecret, { force: true })
    rmSync(configDir, { recursive: true, force: true })
  })

  const attempt = async (what: string, arg: string) =>
    textOf(await client.callTool({ name: 'hostile__attempt', arguments: { what, arg } }))

  test('cannot read the home, the config folder, the config or the gateway environment', async () => {
    for (const path of [
      homeSecret,
      join(configDir, 'secret.txt'),
      join(configDir, 'barbican.json'),
      `/proc/${process.pid}/environ`,
    ]) {
      assert.match(await attempt('read', path), /^refused: /, path)
    }
  })

  test('cannot write outside its state folder', async () => {
    for (const path of [join(configDir, 'pwned'), join(root, 'pwned'), '/etc/pwned']) {
      assert.match(await attempt('write', path), /^refused: /, path)
      assert.equal(existsSync(path), false, path)
    }
    // Its state folder is its own, and persists on the host.
    const state = join(configDir, '.barbican/state/hostile')
    assert.equal(
      await attempt('write', join(state, 'kept')),
      `escaped: wrote ${join(state, 'kept')}`,
    )
    assert.equal(readFileSync(join(state, 'kept'), 'utf8'), 'written by a hostile server')
  })

  test('reaches no loopback listener, by address or by name', async () => {
    assert.match(await attempt('connect', String(port)), /^refused: /)
    assert.match(await attempt('resolve', 'localtest.me'), /^refused: /)
    assert.equal(connections, 0, 'the listener saw no connection')
  })

  test('cannot fork 500 processes, allocate 4 GiB or spin past its CPU limit', async () => {
    assert.match(await attempt('fork', '500'), /^refused: EAGAIN after \d+ processes/)
    assert.match(await attempt('allocate', '4'), /^refused: .* after \d+ MiB/)
    assert.equal(await attempt('spin', '30'), 'refused: killed by SIGXCPU')
  })

  test('cannot make a user namespace or mount (seccomp)', async () => {
    assert.match(await attempt('unshare', 'user'), /^refused: .*Operation not permitted/)
    assert.match(await attempt('unshare', 'mount'), /^refused: .*Operation not permitted/)
  })

  test('cannot signal the gateway, which stays up beside the other upstream', async () => {
    assert.match(await attempt('kill', String(process.pid)), /^refused: (ESRCH|EPERM)/)
    const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } })
    assert.match(textOf(echo), /hi/)
  })

  test('leaves no daemon behind once its upstream stops', async () => {
    const marker = `3000.${process.pid}${Date.now() % 100000}`
    assert.match(await attempt('daemon', marker), /^escaped: daemon/)
    assert.equal(processesMentioning(marker).length, 1, 'the daemon runs inside the sandbox')
    await client.close()
    await server.stop()
    const deadline = Date.now() + 10_000
    while (processesMentioning(marker).length > 0) {
      assert.ok(Date.now() < deadline, 'the daemon outlived its upstream')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  })
})

describe('an npx upstream in the default sandbox', () => {
  test('runs the package installed outside, with no network inside', async () => {
    const manifest = join(root, 'node_modules/@modelcontextprotocol/server-everything/package.json')
    const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-sandbox-npx-')))
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        npx: {
          command: 'npx',
          args: ['-y', `@modelcontextprotocol/server-everything@${version}`, 'stdio'],
          cwd: root,
        },
      },
    })
    const { config } = parseConfigText(text, { file: join(dir, 'barbican.json') })
    const gateway = await startServer(config, silentLogger)
    const npxClient = new Client({ name: 'sandbox-npx', version: '1.0.0' })
    try {
      await npxClient.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`)))
      const echo = await npxClient.callTool({ name: 'echo', arguments: { message: 'via npx' } })
      assert.match(textOf(echo), /via npx/)
    } finally {
      await npxClient.close()
      await gateway.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
