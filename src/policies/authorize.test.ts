import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { rules } from '../../test/support/plans.ts'
import type { Identity } from '../auth/identity.ts'
import { buildCatalog } from '../catalog/catalog.ts'
import type { Request } from '../protocol/model.ts'
import { listPage } from '../relay/local-answers.ts'
import { silentLogger } from '../telemetry/log.ts'
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
    route: method.endsWith('/list') ? { kind: 'fanout', catalog, degraded: [] } : { kind: 'local' },
    signal: new AbortController().signal,
    log: silentLogger,
  }
}

const catalog = buildCatalog(
  [
    {
      name: 'files',
      tools: [{ name: 'read' }, { name: 'write' }],
      prompts: [],
      resources: [],
      resourceTemplates: [],
    },
    { name: 'gh', tools: [{ name: 'issue' }], prompts: [], resources: [], resourceTemplates: [] },
  ],
  rules('always'),
)

/** Lists are paged from the route's catalog, as the session's relay does. */
const relay = async (c: Call): Promise<Reply> =>
  c.route.kind === 'fanout'
    ? listPage(c.route.catalog, c.request.method, undefined, 100)
    : { kind: 'result', id: c.request.id, resultType: 'complete', result: { ok: true } }

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

  test('a rule naming only tools grants no prompt and no resource', async () => {
    const only = compose(
      [authorize([{ subjects: ['alice'], servers: ['*'], tools: ['files__*'] }])],
      relay,
    )
    await assert.rejects(only(call(alice, 'prompts/get', { name: 'files__p' })), {
      code: 'ERR_POLICY_DENIED',
      message: /may not use the prompt "files__p"/,
    })
    await assert.rejects(only(call(alice, 'resources/read', { uri: 'files+file:///a' })), {
      code: 'ERR_POLICY_DENIED',
      message: /may not use the resource "files\+file:\/\/\/a"/,
    })
  })

  test('a rule naming no tools, prompts or resources grants all of them on its servers', async () => {
    const open = compose([authorize([{ subjects: ['alice'], servers: ['default'] }])], relay)
    for (const [method, params] of [
      ['tools/call', { name: 'x' }],
      ['prompts/get', { name: 'y' }],
      ['resources/read', { uri: 'mem://z' }],
    ] as const) {
      assert.equal((await open(call(alice, method, params))).kind, 'result')
    }
    await assert.rejects(open(call(alice, 'tools/call', { name: 'x' }, 'ops')), {
      code: 'ERR_POLICY_DENIED',
    })
  })

  test('resource grants judge the normalised URI, never its spelling', async () => {
    const chain = compose(
      [
        authorize([
          { subjects: ['alice'], servers: ['*'], resources: ['files+file://R/public/**'] },
        ]),
      ],
      relay,
    )
    const read = (uri: string) => chain(call(alice, 'resources/read', { uri }))
    assert.equal((await read('files+file://R/public/a.txt')).kind, 'result')
    assert.equal((await read('files+FILE://r/public/./b//a.txt')).kind, 'result')
    for (const uri of [
      'files+file://R/public/%2e%2e/secret.txt',
      'files+file://R/public/../secret.txt',
      'files+file://R/Public/a.txt',
    ]) {
      await assert.rejects(read(uri), { code: 'ERR_POLICY_DENIED' }, uri)
    }
  })

  test('a routed request whose target cannot be judged is refused', async () => {
    const chain = compose([authorize([{ subjects: ['alice'], servers: ['*'] }])], relay)
    const routed = (c: Call): Call => ({
      ...c,
      route: { kind: 'unicast', upstream: 'files', original: 'x' },
    })
    await assert.rejects(
      chain(routed(call(alice, 'resources/read', { uri: 'files+file:///a%2Fb' }))),
      { code: 'ERR_POLICY_DENIED', message: /names nothing to judge/ },
    )
    await assert.rejects(chain(routed(call(alice, 'tools/call', {}))), {
      code: 'ERR_POLICY_DENIED',
    })
  })

  test('a completion is judged by its reference; a template by where it points', async () => {
    const chain = compose(
      [
        authorize([
          {
            subjects: ['alice'],
            servers: ['*'],
            prompts: ['files__*'],
            resources: ['file:///data/*'],
          },
        ]),
      ],
      relay,
    )
    const complete = (ref: Record<string, string>) =>
      chain(call(alice, 'completion/complete', { ref, argument: { name: 'a', value: '' } }))
    assert.equal((await complete({ type: 'ref/prompt', name: 'files__p' })).kind, 'result')
    assert.equal((await complete({ type: 'ref/resource', uri: 'file:///data/{n}' })).kind, 'result')
    await assert.rejects(complete({ type: 'ref/prompt', name: 'gh__p' }), {
      code: 'ERR_POLICY_DENIED',
    })
    await assert.rejects(complete({ type: 'ref/resource', uri: 'file:///data/{+path}' }), {
      code: 'ERR_POLICY_DENIED',
    })
    await assert.rejects(complete({ type: 'ref/resource', uri: 'file:///{path}' }), {
      code: 'ERR_POLICY_DENIED',
    })
  })
})
