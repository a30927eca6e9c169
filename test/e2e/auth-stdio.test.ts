/**
 * `barbican stdio` acts for the user its configuration names (stdio has no tokens; the host that
 * launched it vouches): upstream requests carry that user and tenant, with an assertion.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { decodeJwt } from 'jose'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const barbicanBin = fileURLToPath(new URL('../../bin/barbican.js', import.meta.url))

describe('barbican stdio identity', () => {
  let upstream: RecordingUpstream
  let dir: string
  let client: Client

  before(async () => {
    upstream = await startRecordingUpstream()
    dir = mkdtempSync(join(tmpdir(), 'barbican-stdio-auth-'))
    const configFile = join(dir, 'barbican.json')
    writeFileSync(
      configFile,
      JSON.stringify({
        upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
        auth: { stdio: { subject: 'alice', tenant: 'acme', scopes: ['mcp:tools'] } },
      }),
    )
    client = new Client({ name: 'host', version: '1.0.0' })
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [barbicanBin, 'stdio', '--config', configFile],
        stderr: 'ignore',
      }),
    )
  })
  after(async () => {
    await client?.close()
    await upstream?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  test('upstream requests carry the configured user, tenant and an assertion for them', async () => {
    const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
      content: { text: string }[]
    }
    const seen = JSON.parse(result.content[0]!.text) as {
      meta: Record<string, { user: string; tenant: string; assertion: string }>
    }
    const context = seen.meta['dev.barbican/context']!
    assert.equal(context.user, 'alice')
    assert.equal(context.tenant, 'acme')
    const claims = decodeJwt(context.assertion)
    assert.equal(claims.sub, 'alice')
    assert.equal(claims.auth_method, 'config')
    assert.equal(claims.aud, upstream.url)
  })
})
