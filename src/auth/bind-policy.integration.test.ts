import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { runServe } from '../cli/serve.ts'
import { normalizeConfig } from '../config/normalize.ts'
import { hasInboundAuth } from './bind-policy.ts'

const upstreams = { a: { url: 'https://a.example/mcp' } }

describe('non-loopback safe default', () => {
  test('only token or API key settings count as inbound authentication', () => {
    const auth = (section: unknown) => normalizeConfig({ upstreams, auth: section }).auth
    assert.equal(hasInboundAuth(undefined), false)
    assert.equal(hasInboundAuth(auth({ stdio: { subject: 'a' }, network: { allow: [] } })), false)
    assert.equal(hasInboundAuth(auth({ jwt: { issuer: 'https://idp.example' } })), true)
    assert.equal(hasInboundAuth(auth({ apiKeys: { keys: [] } })), true)
    assert.equal(
      hasInboundAuth(
        auth({
          introspection: { endpoint: 'https://i.example', clientId: 'c', clientSecret: 's' },
        }),
      ),
      true,
    )
  })

  test('serve refuses a non-loopback bind whose auth section authenticates nobody', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-bind-'))
    try {
      const config = join(dir, 'barbican.json')
      writeFileSync(
        config,
        JSON.stringify({ listen: '0.0.0.0:0', upstreams, auth: { stdio: { subject: 'a' } } }),
      )
      let stderr = ''
      const code = await runServe(
        { config, allowInsecureNonLoopback: false },
        { stdout: () => {}, stderr: (t) => (stderr += t) },
      )
      assert.equal(code, 1)
      assert.match(stderr, /refusing to listen on 0\.0\.0\.0/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
