/**
 * mcp-remote as its README configures it (issue 29 point 7): a stdio bridge whose one argument is
 * the URL of a Streamable HTTP server, here a local one on a loopback port. Confined with no
 * sandbox settings, it must reach that port (a connect grant from its argument) and nothing
 * else. The evidence is the `tools/call` the HTTP server recorded, outside Barbican.
 *
 * Under the fallback it also needs the existence probes of its `is-wsl` dependency, which the
 * Node.js permission model would otherwise answer with ERR_ACCESS_DENIED at import (ADR 108).
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'
import {
  connect,
  importConfig,
  logLines,
  MECHANISMS,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry.
const SPEC = 'mcp-remote@0.15.1'

for (const mechanism of MECHANISMS) {
  describe(`mcp-remote in front of a local Streamable HTTP server, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let remote: RecordingUpstream
    let file: string

    before(async () => {
      remote = await startRecordingUpstream()
      project = workspace(`remote-${mechanism}`)
      writeClaudeConfig(project.dir, { remote: { command: 'npx', args: ['-y', SPEC, remote.url] } })
      file = (await importConfig(project.dir)).file
    })

    after(async () => {
      await remote.close()
      project.remove()
    })

    test('the call reaches the HTTP server its URL names', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        const answer = await client.call('whoami')
        await client.close()
        assert.match(answer, /"meta"/, gateway.log())
        const calls = remote.requests.filter(
          (r) => (r.body as { method?: string } | undefined)?.method === 'tools/call',
        )
        assert.equal(calls.length, 1, gateway.log())
        // mcp-remote's own client made the connection (its probe names itself), not the gateway.
        const names = remote.requests.map(
          (r) => (r.body as { params?: { clientInfo?: { name?: string } } } | undefined)?.params,
        )
        assert.ok(
          names.some((p) => p?.clientInfo?.name?.startsWith('mcp-remote')),
          JSON.stringify(names),
        )
        if (mechanism === 'bubblewrap') {
          // Through the connect forward, logged by the gateway.
          assert.notEqual(logLines(gateway, /"msg":"connect allowed"/).length, 0, gateway.log())
        }
      } finally {
        await gateway.stop()
      }
    })
  })
}
