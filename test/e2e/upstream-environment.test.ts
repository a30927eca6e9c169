/**
 * What a stdio upstream finds in its environment when `barbican serve` runs behind a proxy with
 * a custom CA: the proxy, CA, locale and timezone variables of Barbican's own environment reach
 * it (so `npx` can download through a TLS-inspecting proxy), its declared `env` wins, and no
 * other variable of Barbican's environment does (the official everything server's `get-env`).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { EVERYTHING } from '../fixtures/upstream-helpers.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')

test('serve passes proxies, CA files, locale and timezone to a stdio upstream, and no secret', async () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-env-')))
  const ca = join(dir, 'proxy-ca.pem')
  writeFileSync(ca, '')
  const file = join(dir, 'barbican.json')
  writeFileSync(
    file,
    JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        everything: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          env: { DECLARED: 'yes', TZ: 'UTC' },
        },
      },
    }),
  )
  const child = spawn(process.execPath, [bin, 'serve', '--config', file], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      HTTPS_PROXY: 'http://proxy.corp.example:3128',
      https_proxy: 'http://proxy.corp.example:3128',
      NO_PROXY: '127.0.0.1,localhost',
      SSL_CERT_FILE: ca,
      NODE_EXTRA_CA_CERTS: ca,
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'Europe/Paris',
      OTHER_SERVERS_TOKEN: 'must-not-leak',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  let client: Client | undefined
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let seen = ''
      const timer = setTimeout(() => reject(new Error(`serve did not start: ${seen}`)), 30_000)
      child.stderr?.on('data', (chunk: Buffer) => {
        seen += chunk.toString()
        const match = /serving .* at (http:\/\/[^\s]+\/mcp)/.exec(seen)
        if (match) {
          clearTimeout(timer)
          resolve(match[1]!)
        }
      })
    })
    client = new Client({ name: 'env', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(url)))
    // The upstream starts in the background: wait until the catalog lists it.
    const deadline = Date.now() + 20_000
    while (!(await client.listTools()).tools.some((t) => t.name === 'get-env')) {
      assert.ok(Date.now() < deadline, 'get-env was never listed')
      await new Promise((r) => setTimeout(r, 200))
    }
    const result = await client.callTool({ name: 'get-env', arguments: {} })
    const env = JSON.parse(textOf(result)) as Record<string, string>
    assert.equal(env.HTTPS_PROXY, 'http://proxy.corp.example:3128')
    assert.equal(env.https_proxy, 'http://proxy.corp.example:3128')
    assert.equal(env.NO_PROXY, '127.0.0.1,localhost')
    assert.equal(env.SSL_CERT_FILE, ca)
    assert.equal(env.NODE_EXTRA_CA_CERTS, ca)
    assert.equal(env.LANG, 'C.UTF-8')
    assert.equal(env.LC_ALL, 'C.UTF-8')
    assert.equal(env.TZ, 'UTC', 'the declared value wins')
    assert.equal(env.DECLARED, 'yes')
    // Confined by default: the server's HOME is its own state folder, not the gateway's home.
    assert.equal(env.HOME, join(dir, '.barbican/state/everything'))
    assert.equal(env.OTHER_SERVERS_TOKEN, undefined)
  } finally {
    await client?.close()
    child.kill('SIGTERM')
    await exited
  }
})
