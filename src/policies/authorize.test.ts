import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { Identity } from '../auth/identity.ts'
import { silentLogger } from '../common/log.ts'
import type { Request } from '../protocol/model.ts'
import { authorize } from './authorize.ts'
import { compose } from './chain.ts'
import type { Call, Reply } from './policy.ts'

const alice: Identity = {
  subject: 'alice',
  tenant: 'acme',
  scopes: ['mcp:tools'],
  method: 'jwt',
  claims: { groups: ['eng'] },
}
const bob: Identity = { subject: 'bob', scopes: [], method: 'api-key' }

function call(
  identity: Identity,
  method: string,
  params: Record<string, unknown> = {},
  server = 'default',
): Call {
  return {
    id: 'c1',
    request: { kind: 'request', id: 1, method, params } as Request,
    identity,
    server,
    transport: 'streamable-http',
    route: { kind: 'local' },
    signal: new AbortController().signal,
    log: silentLogger,
  }
}

const relay = async (c: Call): Promise<Reply> => ({
  kind: 'result',
  id: c.request.id,
  resultType: 'complete',
  result:
    c.request.method === 'tools/list'
      ? { tools: [{ name: 'files__read' }, { name: 'files__write' }, { name: 'gh__issue' }] }
      : { ok: true },
})

describe('authorize policy', () => {
  const chain = compose(
    [
      authorize([
        { claims: { groups: 'eng' }, servers: ['*'], tools: ['files__*'] },
        { subjects: ['bob'], servers: ['default'], tools: ['gh__issue'] },
        { tenants: ['acme'], scopes: ['mcp:tools'], servers: ['ops'], tools: ['*'] },
      ]),
    ],
    relay,
  )

  test('lets a caller call a tool a matching rule grants', async () => {
    const reply = await chain(call(alice, 'tools/call', { name: 'files__write' }))
    assert.equal(reply.kind, 'result')
  })

  test('refuses a tool no rule grants the caller with ERR_POLICY_DENIED', async () => {
    await assert.rejects(chain(call(alice, 'tools/call', { name: 'gh__issue' })), {
      code: 'ERR_POLICY_DENIED',
    })
    await assert.rejects(chain(call(bob, 'tools/call', { name: 'files__read' })), {
      code: 'ERR_POLICY_DENIED',
    })
  })

  test('shows each caller only the tools they may call', async () => {
    const names = async (who: Identity) => {
      const reply = await chain(call(who, 'tools/list'))
      assert.equal(reply.kind, 'result')
      return (reply.kind === 'result' ? (reply.result.tools as { name: string }[]) : []).map(
        (t) => t.name,
      )
    }
    assert.deepEqual(await names(alice), ['files__read', 'files__write'])
    assert.deepEqual(await names(bob), ['gh__issue'])
  })

  test('refuses every call on a server no rule covers for the caller', async () => {
    await assert.rejects(chain(call(bob, 'tools/list', {}, 'ops')), { code: 'ERR_POLICY_DENIED' })
    const reply = await chain(call(alice, 'tools/call', { name: 'anything' }, 'ops'))
    assert.equal(reply.kind, 'result')
  })

  test('decisions remembered for one identity and server never apply to another', async () => {
    // The same identity object, repeatedly and on two servers, then a look-alike without the scope.
    for (let i = 0; i < 2; i++) {
      const ops = await chain(call(alice, 'tools/call', { name: 'deploy' }, 'ops'))
      assert.equal(ops.kind, 'result')
      await assert.rejects(chain(call(alice, 'tools/call', { name: 'deploy' })), {
        code: 'ERR_POLICY_DENIED',
      })
    }
    const unscoped: Identity = { ...alice, scopes: [] }
    await assert.rejects(chain(call(unscoped, 'tools/call', { name: 'deploy' }, 'ops')), {
      code: 'ERR_POLICY_DENIED',
    })
    const outsider: Identity = { ...alice, tenant: 'other', claims: {} }
    await assert.rejects(chain(call(outsider, 'tools/list', {}, 'ops')), {
      code: 'ERR_POLICY_DENIED',
    })
  })
})
