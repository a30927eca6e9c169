/**
 * Resource filters judge the URI the upstream will serve: traversal and encoding tricks against
 * an `include`/`exclude` pair, through the gateway, against an upstream that serves whatever
 * path it decodes (test/fixtures/naive-file-server.ts).
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { fixture } from '../fixtures/upstream-helpers.ts'
import { grantTo } from '../support/sandbox.ts'

const SECRET = 'the private secret'

describe('resource URIs are judged in the form the upstream serves', () => {
  let server: RunningServer
  let client: Client
  let dir: string

  before(async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-traversal-')))
    mkdirSync(join(dir, 'public'))
    mkdirSync(join(dir, 'private'))
    writeFileSync(join(dir, 'public', 'notes.txt'), 'public notes')
    writeFileSync(join(dir, 'private', 'secret.txt'), SECRET)
    mkdirSync(join(dir, 'public', 'Private'))
    writeFileSync(join(dir, 'public', 'Private', 'secret.txt'), SECRET)
    // The file server runs in the default sandbox: its root is handed to it, as an operator would.
    grantTo('files', dir)
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        files: { command: process.execPath, args: [fixture('naive-file-server.ts'), dir] },
      },
      servers: {
        default: {
          upstreams: ['files'],
          namespacing: { mode: 'always' },
          resources: { include: ['file://R/public/**'], exclude: ['**/private/**'] },
        },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
    client = new Client({ name: 'traversal', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })

  after(async () => {
    await client?.close()
    await server?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  test('a public file is served, and the upstream receives the normalised URI', async () => {
    const { contents } = await client.readResource({
      uri: 'files+file://R/public/./drafts/..//notes.txt',
    })
    assert.equal(contents[0]?.uri, 'files+file://r/public/notes.txt')
    assert.deepEqual(
      contents[0] && 'text' in contents[0] ? contents[0].text : undefined,
      'file://r/public/notes.txt\npublic notes',
    )
  })

  for (const [uri, refusal] of [
    ['files+file://R/public/%2e%2e/%70rivate/%73ecret.txt', /Unknown resource/],
    ['files+file://R/public/Private/secret.txt', /Unknown resource/],
    ['files+file://R/public/..%2Fprivate/secret.txt', /encoded slash/],
    ['files+file://R/public/%252e%252e/private/secret.txt', /double percent-encoding/],
  ] as const) {
    test(`${uri} is refused before the upstream`, async () => {
      let served = ''
      await assert.rejects(
        client.readResource({ uri }).then((r) => {
          served = JSON.stringify(r)
        }),
        refusal,
      )
      assert.doesNotMatch(served, new RegExp(SECRET))
    })
  }
})
