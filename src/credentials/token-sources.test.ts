import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import type { Identity } from '../auth/identity.ts'
import { rememberSubjectToken } from '../auth/request-identity.ts'
import { createGuardedFetch, type GuardedFetch } from '../net/guarded-fetch.ts'
import { tokenExchangeSource } from './token-sources.ts'

// A scripted token endpoint: oidc-provider has no RFC 8693 grant, and what matters here is
// exactly what Barbican sends it.
describe('RFC 8693 token exchange', () => {
  let server: Server
  let endpoint: string
  let fetch: GuardedFetch
  const requests: { auth: string | undefined; form: URLSearchParams }[] = []

  before(async () => {
    server = createServer(async (req, res) => {
      let body = ''
      for await (const chunk of req) body += chunk
      const form = new URLSearchParams(body)
      requests.push({ auth: req.headers.authorization, form })
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(
        JSON.stringify({
          access_token: `exchanged-for-${form.get('subject_token')}-${requests.length}`,
          issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          token_type: 'Bearer',
          expires_in: 300,
        }),
      )
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`
    fetch = createGuardedFetch({ allow: ['127.0.0.1'] })
  })
  after(async () => {
    await fetch.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  test('exchanges the caller token for one addressed to the upstream, cached per user', async () => {
    const source = tokenExchangeSource(
      {
        tokenEndpoint: endpoint,
        clientId: 'barbican',
        clientSecret: 's3cret',
        scopes: ['files.read'],
        resource: 'https://up.example/mcp',
      },
      fetch,
    )
    const alice: Identity = { subject: 'alice', scopes: [], method: 'jwt' }
    rememberSubjectToken(alice, 'alice-token')
    const first = await source.forUser(alice)
    assert.deepEqual(first, { headers: { authorization: 'Bearer exchanged-for-alice-token-1' } })
    assert.deepEqual(await source.forUser(alice), first, 'cached')
    assert.equal(requests.length, 1)
    const { auth, form } = requests[0]!
    assert.equal(auth, `Basic ${Buffer.from('barbican:s3cret').toString('base64')}`)
    assert.equal(form.get('grant_type'), 'urn:ietf:params:oauth:grant-type:token-exchange')
    assert.equal(form.get('subject_token'), 'alice-token')
    assert.equal(form.get('subject_token_type'), 'urn:ietf:params:oauth:token-type:access_token')
    assert.equal(form.get('resource'), 'https://up.example/mcp')
    assert.equal(form.get('scope'), 'files.read')

    await source.rejected?.(alice)
    assert.deepEqual(await source.forUser(alice), {
      headers: { authorization: 'Bearer exchanged-for-alice-token-2' },
    })

    const keyHolder: Identity = { subject: 'ci', scopes: [], method: 'api-key' }
    await assert.rejects(source.forUser(keyHolder), { code: 'ERR_OAUTH' })
  })
})
