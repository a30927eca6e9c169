/**
 * The link page when the shared store of link states fails after the ticket was taken
 * (docs/decisions/089): the page says what failed, the shared state store, with its stable code,
 * rather than blaming the authorization server.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { servedIssuerMetadata } from '../../test/support/issuer-metadata.ts'
import type { Identity } from '../auth/identity.ts'
import { createGuardedFetch } from '../net/guarded-fetch.ts'
import { silentLogger } from '../telemetry/log.ts'
import { ClientRegistrar } from './client-registration.ts'
import { type LinkState, MemoryLinkFlowStore } from './link-flow-store.ts'
import { LinkRegistry } from './oauth-link.ts'
import { LocalKeyProvider } from './secret-box.ts'
import { memoryBackend, TokenStore } from './token-store.ts'

/** Tickets work; storing a state fails, as Redis going away between the two would. */
class StatelessFlows extends MemoryLinkFlowStore {
  override async putState(_id: string, _state: LinkState, _ttlMs: number): Promise<void> {
    throw new Error('The client is closed')
  }
}

test('a state store failing after the ticket is taken names the store and its code', async () => {
  let routes = new Map<string, (req: never, res: never) => Promise<void> | void>()
  const server = createServer((req, res) => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    if (servedIssuerMetadata(req, res, base)) return
    const route = routes.get(new URL(req.url ?? '/', base).pathname)
    if (route === undefined) {
      res.writeHead(404).end()
      return
    }
    void route(req as never, res as never)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const fetch = createGuardedFetch({ allow: ['127.0.0.1'] })
  try {
    const keys = new LocalKeyProvider(randomBytes(32))
    const backend = memoryBackend()
    const registry = new LinkRegistry({
      fetch,
      store: new TokenStore(keys, backend),
      baseUrl: () => base,
      log: silentLogger,
      clients: new ClientRegistrar({
        fetch,
        keys,
        backend,
        baseUrl: () => base,
        redirectUri: () => `${base}/oauth/callback`,
        log: silentLogger,
      }),
      flows: new StatelessFlows(),
    })
    const source = registry.add('drive', {
      clientId: 'barbican',
      scopes: [],
      issuer: base,
      resource: `${base}/mcp`,
    })
    routes = registry.routes() as typeof routes
    const identity: Identity = { subject: 'alice', scopes: [], method: 'jwt' }
    const outcome = await source.forUser(identity)
    assert.ok('linkRequired' in outcome && outcome.linkRequired !== undefined)

    const res = await globalThis.fetch(outcome.linkRequired.url)
    const body = await res.text()
    assert.equal(res.status, 503)
    assert.match(body, /shared state store/)
    assert.match(body, /ERR_STORE_UNAVAILABLE/)
    assert.doesNotMatch(body, /authorization server/)
    // The ticket was spent before the state failed: the user asks for a new link.
    const again = await globalThis.fetch(outcome.linkRequired.url)
    assert.equal(again.status, 400)
    await again.text()
  } finally {
    server.close()
    await fetch.close()
  }
})
