/**
 * `barbican stdio` with tenants: the configured stdio identity's tenant is the configuration
 * served, and a tenant the file does not configure is refused at start (fail closed).
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const barbicanBin = fileURLToPath(new URL('../../bin/barbican.js', import.meta.url))

describe('barbican stdio with tenants', () => {
  let upstream: RecordingUpstream
  let dir: string

  const configFor = (tenant: string) => {
    const file = join(dir, `${tenant}.json`)
    writeFileSync(
      file,
      JSON.stringify({
        // The default tenant's `main` is unreachable: only acme's answers.
        upstreams: { main: { url: 'http://127.0.0.1:9/mcp', transport: 'streamable-http' } },
        tenants: {
          acme: { upstreams: { main: { url: upstream.url, transport: 'streamable-http' } } },
        },
        auth: { stdio: { subject: 'alice', tenant } },
        audit: { enabled: false },
        store: { memory: {} },
      }),
    )
    return file
  }

  before(async () => {
    upstream = await startRecordingUpstream()
    dir = mkdtempSync(join(tmpdir(), 'barbican-stdio-tenants-'))
  })
  after(async () => {
    await upstream?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  test("serves the stdio identity's tenant", async () => {
    const client = new Client({ name: 'host', version: '1.0.0' })
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [barbicanBin, 'stdio', '--config', configFor('acme')],
        stderr: 'ignore',
      }),
    )
    try {
      const { tools } = await client.listTools()
      assert.ok(
        tools.some((t) => t.name === 'whoami'),
        JSON.stringify(tools),
      )
    } finally {
      await client.close()
    }
  })

  test('refuses a stdio identity naming a tenant that is not configured', () => {
    const run = spawnSync(
      process.execPath,
      [barbicanBin, 'stdio', '--config', configFor('initech')],
      { encoding: 'utf8', input: '', timeout: 20_000 },
    )
    assert.equal(run.status, 1)
    assert.match(
      run.stderr,
      /auth\.stdio\.tenant names tenant \\?"initech\\?", which tenants: does not/,
    )
  })
})
