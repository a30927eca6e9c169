/**
 * Walks the method → permission table: every client request the protocol defines has an entry,
 * docs/security.md prints the same table, and for each entry a caller granted only `a__echo`
 * cannot reach anything of upstream `b` through that method.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { rules } from '../../test/support/plans.ts'
import type { Identity } from '../auth/identity.ts'
import { buildCatalog } from '../catalog/catalog.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { METHOD_SPECS } from '../protocol/methods.ts'
import type { Request } from '../protocol/model.ts'
import { listPage } from '../relay/local-answers.ts'
import { silentLogger } from '../telemetry/log.ts'
import type { Route } from '../virtual-servers/route.ts'
import { authorize } from './authorize.ts'
import { compose } from './chain.ts'
import { METHOD_PERMISSIONS, permissionOf } from './method-permissions.ts'
import type { Call, Reply } from './policy.ts'

const lists = (name: string) => ({
  name,
  tools: [{ name: 'echo' }],
  prompts: [{ name: 'leak' }],
  resources: [{ uri: 'mem://secret/key' }],
  resourceTemplates: [{ uriTemplate: 'mem://secret/{id}' }],
})
const catalog = buildCatalog([lists('a'), lists('b')], rules('always'))

/** Every request a client sends to a server, in any revision. */
const CLIENT_REQUESTS = METHOD_SPECS.filter(
  (s) => s.kind === 'request' && s.direction !== 'toClient',
).map((s) => s.method)

/** For each client request: parameters aimed at upstream `b`. */
const AIMED_AT_B: Readonly<Record<string, JsonObject>> = {
  initialize: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: {} },
  ping: {},
  'server/discover': {},
  'logging/setLevel': { level: 'info' },
  'tools/list': {},
  'tools/call': { name: 'b__echo', arguments: {} },
  'prompts/list': {},
  'prompts/get': { name: 'b__leak' },
  'resources/list': {},
  'resources/templates/list': {},
  'resources/read': { uri: 'b+mem://secret/key' },
  'resources/subscribe': { uri: 'b+mem://secret/key' },
  'resources/unsubscribe': { uri: 'b+mem://secret/key' },
  'completion/complete': {
    ref: { type: 'ref/resource', uri: 'b+mem://secret/{id}' },
    argument: { name: 'id', value: '' },
  },
  'tasks/get': { taskId: 't1' },
  'tasks/result': { taskId: 't1' },
  'tasks/cancel': { taskId: 't1' },
  'tasks/list': {},
  'subscriptions/listen': {
    notifications: { resourceSubscriptions: ['b+mem://secret/key', 'a+mem://secret/key'] },
  },
}

const mallory: Identity = { subject: 'mallory', scopes: [], method: 'api-key' }
const alice: Identity = { subject: 'alice', scopes: [], method: 'api-key' }
const nobody: Identity = { subject: 'nobody', scopes: [], method: 'api-key' }

/** What reached the relay, so a test sees that a refused call went nowhere. */
const reached: Call[] = []
const chain = compose(
  [
    authorize([
      { subjects: ['mallory'], servers: ['*'], tools: ['a__echo'] },
      { subjects: ['alice'], servers: ['*'] },
    ]),
  ],
  async (c): Promise<Reply> => {
    reached.push(c)
    if (c.route.kind === 'fanout') return listPage(c.route.catalog, c.request.method, undefined, 50)
    return { kind: 'result', id: c.request.id, resultType: 'complete', result: {} }
  },
)

function routeOf(method: string): Route {
  const permission = permissionOf(method)!
  if (permission.list) return { kind: 'fanout', catalog, degraded: [] }
  // A task of b: created by a call to b's tool (the session records it, route.ts carries it).
  if (method.startsWith('tasks/')) {
    return { kind: 'unicast', upstream: 'b', original: 't1', createdBy: 'b__echo' }
  }
  if (permission.item) return { kind: 'unicast', upstream: 'b', original: 'x' }
  return { kind: 'local' }
}

function send(identity: Identity, method: string): Promise<Reply> {
  const request: Request = { kind: 'request', id: 1, method, params: AIMED_AT_B[method] }
  return chain({
    id: 'c',
    request,
    identity,
    server: 'default',
    transport: 'streamable-http',
    route: routeOf(method),
    signal: new AbortController().signal,
    log: silentLogger,
  })
}

/** Every item of a list reply (names and URIs). */
function listed(reply: Reply): string[] {
  assert.equal(reply.kind, 'result')
  const result = reply.kind === 'result' ? reply.result : {}
  return Object.values(result)
    .filter(Array.isArray)
    .flat()
    .map((i) => String(i.name ?? i.uri ?? i.uriTemplate))
}

describe('the method → permission table', () => {
  test('has an entry for every client request of every revision, and no other', () => {
    assert.deepEqual(Object.keys(METHOD_PERMISSIONS).sort(), [...CLIENT_REQUESTS].sort())
  })

  test('judges the item of every method routed to one upstream, and narrows every merged list', () => {
    for (const spec of METHOD_SPECS) {
      const permission = permissionOf(spec.method)
      if (spec.list !== undefined) assert.equal(permission?.list, true, spec.method)
      if (spec.target !== undefined) {
        assert.equal(typeof permission?.item, 'function', spec.method)
      }
    }
  })

  test('is the table docs/security.md prints', () => {
    const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8')
    const table = doc.slice(doc.indexOf('| method | permission needed |')).split('\n\n')[0]!
    const rows = new Map<string, string>()
    for (const match of table.matchAll(/^\| `([a-z/A-Z]+)` +\| (.+?) +\|$/gm)) {
      rows.set(match[1]!, match[2]!)
    }
    for (const [method, permission] of Object.entries(METHOD_PERMISSIONS)) {
      assert.equal(rows.get(method), permission.needs, `docs/security.md row for ${method}`)
    }
    assert.equal(rows.size, Object.keys(METHOD_PERMISSIONS).length)
  })

  for (const method of CLIENT_REQUESTS) {
    test(`${method}: a caller granted only a__echo reaches nothing of upstream b`, async () => {
      const permission = permissionOf(method)
      assert.ok(permission, `no permission entry for ${method}`)
      assert.ok(AIMED_AT_B[method], `no request aimed at b for ${method}`)
      await assert.rejects(send(nobody, method), { code: 'ERR_POLICY_DENIED' })

      reached.length = 0
      if (permission.item) {
        await assert.rejects(send(mallory, method), { code: 'ERR_POLICY_DENIED' })
        assert.equal(reached.length, 0, 'refused before the upstream')
        assert.equal((await send(alice, method)).kind, 'result')
      } else if (permission.list) {
        assert.deepEqual(
          listed(await send(mallory, method)),
          method === 'tools/list' ? ['a__echo'] : [],
        )
        assert.equal(listed(await send(alice, method)).length, 2)
      } else if (permission.watches) {
        await send(mallory, method)
        await send(alice, method)
        const asked = reached.map(
          (c) => (c.request.params?.notifications as JsonObject | undefined)?.resourceSubscriptions,
        )
        assert.deepEqual(asked, [[], ['b+mem://secret/key', 'a+mem://secret/key']])
      } else {
        // Needs only the server: names nothing of b (tasks/list lists the caller's own).
        assert.equal((await send(mallory, method)).kind, 'result')
      }
    })
  }
})
