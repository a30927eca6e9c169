import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  defNames,
  isStandaloneDef,
  methodConst,
  notificationDefsOf,
  requestDefsOf,
  resultDefFor,
  schemaDef,
} from '../../test/support/schema.ts'
import {
  type Direction,
  definedParams,
  EMBEDDED_INPUT_METHODS,
  existsIn,
  gateIn,
  hasCapability,
  isMethod,
  type LocalMethod,
  METHOD_SPECS,
  type Method,
  methodSpec,
} from './methods.ts'
import { REVISIONS, type Revision } from './revisions.ts'

type Def = { [key: string]: unknown }

/** Standalone methods of a revision's schema, with their kind. */
function schemaMethods(revision: Revision): Map<string, 'request' | 'notification'> {
  const out = new Map<string, 'request' | 'notification'>()
  for (const [method, def] of requestDefsOf(revision)) {
    if (isStandaloneDef(revision, def)) out.set(method, 'request')
  }
  for (const [method, def] of notificationDefsOf(revision)) {
    if (isStandaloneDef(revision, def)) out.set(method, 'notification')
  }
  return out
}

/** Methods named by a union def (`ClientRequest`, …): anyOf of refs, or one inlined member. */
function unionMethods(revision: Revision, union: string): string[] {
  const def = schemaDef(revision, union)
  if (def === undefined) return []
  const members = (def.anyOf ?? def.oneOf) as Def[] | undefined
  const defs = members
    ? members.map((m) => schemaDef(revision, String(m.$ref).split('/').pop() ?? ''))
    : [def]
  return defs.map((d) => String(methodConst(d)))
}

/** The member names a params schema allows, following `$ref` and `allOf`/`anyOf`/`oneOf`. */
function paramMembers(revision: Revision, schema: Def | undefined): string[] {
  if (schema === undefined) return []
  if (typeof schema.$ref === 'string') {
    return paramMembers(revision, schemaDef(revision, schema.$ref.split('/').pop() ?? ''))
  }
  const names = Object.keys((schema.properties as Def | undefined) ?? {})
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    for (const part of (schema[key] as Def[] | undefined) ?? []) {
      names.push(...paramMembers(revision, part))
    }
  }
  return names
}

function propertiesOf(revision: Revision, name: string): Def {
  const def = schemaDef(revision, name)
  return (def?.properties as Def | undefined) ?? {}
}

describe('METHOD_SPECS against the official schemas', () => {
  for (const revision of REVISIONS) {
    test(`lists exactly the standalone methods of ${revision}, each with its kind`, () => {
      const fromSchema = schemaMethods(revision)
      const fromTable = new Map(
        METHOD_SPECS.filter((s) => s.revisions.includes(revision)).map((s) => [s.method, s.kind]),
      )
      assert.ok(fromSchema.size > 10, 'the schema yields methods')
      // The tasks extension (tasks/update, notifications/tasks, and 2026's tasks/get and
      // tasks/cancel) has its own schema and is not a core method of any revision, so neither
      // side lists it here; 2025-11-25's core tasks methods are in both.
      assert.deepEqual(
        [...fromTable].sort(([a], [b]) => a.localeCompare(b)),
        [...fromSchema].sort(([a], [b]) => a.localeCompare(b)),
      )
      for (const method of fromSchema.keys()) assert.ok(existsIn(method, revision), method)
    })

    test(`gives each method of ${revision} the direction its schema unions give`, () => {
      const toServer = new Set([
        ...unionMethods(revision, 'ClientRequest'),
        ...unionMethods(revision, 'ClientNotification'),
      ])
      const toClient = new Set([
        ...unionMethods(revision, 'ServerRequest'),
        ...unionMethods(revision, 'ServerNotification'),
      ])
      for (const spec of METHOD_SPECS.filter((s) => s.revisions.includes(revision))) {
        const sides: Direction[] = []
        if (toServer.has(spec.method)) sides.push('toServer')
        if (toClient.has(spec.method)) sides.push('toClient')
        assert.ok(sides.length > 0, `${spec.method} is in a union of ${revision}`)
        // A method is 'both' when some revision sends it either way, so one revision's sides
        // must be allowed by the table's direction.
        if (spec.direction !== 'both') {
          assert.deepEqual(sides, [spec.direction], `${spec.method} in ${revision}`)
        }
      }
    })

    test(`names only capabilities that exist in ${revision}`, () => {
      for (const spec of METHOD_SPECS.filter((s) => s.revisions.includes(revision))) {
        const gate = gateIn(spec.method, revision)
        if (gate === undefined) continue
        let node: Def | undefined = schemaDef(
          revision,
          gate.side === 'server' ? 'ServerCapabilities' : 'ClientCapabilities',
        )
        for (const key of gate.path) {
          const next = (node?.properties as Def | undefined)?.[key] as Def | undefined
          assert.ok(next, `${spec.method}: ${gate.side} capability ${gate.path} in ${revision}`)
          node =
            typeof next.$ref === 'string'
              ? schemaDef(revision, next.$ref.split('/').pop() ?? '')
              : next
        }
      }
    })
  }

  test('ungates completion/complete in 2024-11-05, which has no completions capability', () => {
    assert.equal(gateIn('completion/complete', '2024-11-05'), undefined)
    assert.deepEqual(gateIn('completion/complete', '2025-03-26')?.path, ['completions'])
    assert.equal('completions' in propertiesOf('2024-11-05', 'ServerCapabilities'), false)
  })

  test('knows that 2026-07-28 defines elicitation, sampling and roots only as embedded requests', () => {
    // These defs carry a `method` const in the 2026 schema but no `jsonrpc` or `id`: they
    // travel inside an InputRequiredResult's `inputRequests`, never as JSON-RPC requests, so the
    // table must not list them as 2026 methods while EMBEDDED_INPUT_METHODS names them.
    const embedded = [...requestDefsOf('2026-07-28')]
      .filter(([, def]) => !isStandaloneDef('2026-07-28', def))
      .map(([method]) => method)
      .sort()
    assert.deepEqual(embedded, [...EMBEDDED_INPUT_METHODS].sort())
    for (const method of embedded) {
      assert.equal(existsIn(method, '2026-07-28'), false, method)
      assert.ok(existsIn(method, '2025-11-25'), `${method} is a standalone legacy request`)
    }
  })

  test('marks as cacheable exactly the methods whose 2026 results require ttlMs', () => {
    const cacheable = METHOD_SPECS.filter(
      (s) => s.revisions.includes('2026-07-28') && s.kind === 'request',
    )
      .filter((s) => {
        const def = resultDefFor('2026-07-28', s.method)
        assert.ok(def, `${s.method} has a 2026 result def`)
        return ((schemaDef('2026-07-28', def)?.required as string[]) ?? []).includes('ttlMs')
      })
      .map((s) => s.method)
    assert.deepEqual(
      cacheable.sort(),
      METHOD_SPECS.filter((s) => s.cacheable)
        .map((s) => s.method)
        .sort(),
    )
  })

  test('marks as mrtr exactly the methods whose 2026 response may carry an InputRequiredResult', () => {
    const mrtr = defNames('2026-07-28')
      .filter((name) => name.endsWith('ResultResponse'))
      .filter((name) =>
        JSON.stringify(propertiesOf('2026-07-28', name).result).includes('InputRequiredResult'),
      )
      .map((name) => {
        const request = name.replace(/ResultResponse$/, 'Request')
        const method = (propertiesOf('2026-07-28', request).method as Def | undefined)?.const
        assert.equal(typeof method, 'string', `${request} names its method`)
        return method as string
      })
    assert.deepEqual(
      mrtr.sort(),
      METHOD_SPECS.filter((s) => s.mrtr)
        .map((s) => s.method)
        .sort(),
    )
  })

  test('records as params exactly the members each method defines in some revision, besides _meta', () => {
    const fromSchemas = new Map<string, Set<string>>()
    for (const revision of REVISIONS) {
      for (const [method, def] of [...requestDefsOf(revision), ...notificationDefsOf(revision)]) {
        const params = (schemaDef(revision, def)?.properties as Def | undefined)?.params as Def
        const members = fromSchemas.get(method) ?? new Set<string>()
        for (const name of paramMembers(revision, params)) members.add(name)
        fromSchemas.set(method, members)
      }
    }
    for (const spec of METHOD_SPECS) {
      const expected = [...(fromSchemas.get(spec.method) ?? [])].filter((n) => n !== '_meta')
      assert.deepEqual([...spec.params].sort(), expected.sort(), spec.method)
    }
  })

  test('keeps only the defined params and _meta, dropping look-alike members', () => {
    const params = {
      name: 'echo',
      Name: 'rm',
      NAME: 'rm',
      'name ': 'rm',
      arguments: { a: 1 },
      Arguments: { b: 2 },
      task: { ttl: 1 },
      _meta: { progressToken: 1 },
      __proto__x: 1,
    }
    assert.deepEqual(definedParams('tools/call', params), {
      _meta: { progressToken: 1 },
      name: 'echo',
      arguments: { a: 1 },
      task: { ttl: 1 },
    })
    assert.deepEqual(definedParams('resources/read', { uri: 'u', URI: 'x', requestState: 's' }), {
      uri: 'u',
      requestState: 's',
    })
    assert.deepEqual(definedParams('prompts/get', { name: 'p', ' name': 'q' }), { name: 'p' })
    assert.deepEqual(definedParams('notifications/roots/list_changed', { x: 1 }), {})
    assert.equal(definedParams('tools/list', undefined), undefined)
  })

  test('names as target param and Mcp-Name param members the method defines', () => {
    for (const spec of METHOD_SPECS) {
      if (spec.target) assert.ok(spec.params.includes(spec.target.param), spec.method)
      if (spec.nameParam) assert.ok(spec.params.includes(spec.nameParam), spec.method)
      assert.ok(!(spec.list && spec.target), `${spec.method} is a list or relayed, not both`)
      if (spec.list || spec.target) assert.notEqual(spec.direction, 'toClient', spec.method)
    }
  })

  test('types methods from the table rows', () => {
    const known: Method = 'tools/call'
    // @ts-expect-error -- not a row of the table: tsc (npm run check) fails if Method widens.
    const unknown: Method = 'tools/delete'
    // @ts-expect-error -- relayed, so not answered locally.
    const relayed: LocalMethod = 'tools/call'
    const local: LocalMethod[] = [
      'initialize',
      'ping',
      'logging/setLevel',
      'tasks/list',
      'server/discover',
      'subscriptions/listen',
    ]
    assert.ok(isMethod(known) && !isMethod(unknown) && isMethod(relayed))
    assert.ok(local.every(isMethod))
  })

  test('finds a spec by method and none for an unknown method', () => {
    assert.equal(methodSpec('tools/call')?.nameParam, 'name')
    assert.equal(methodSpec('resources/read')?.nameParam, 'uri')
    assert.equal(methodSpec('tools/unknown'), undefined)
    assert.equal(existsIn('tools/unknown', '2026-07-28'), false)
    assert.equal(existsIn('initialize', '2026-07-28'), false)
  })
})

describe('hasCapability', () => {
  test('treats an empty object and true as present, and false, null or a missing key as absent', () => {
    assert.equal(hasCapability({ tools: {} }, ['tools']), true)
    assert.equal(
      hasCapability({ resources: { subscribe: true } }, ['resources', 'subscribe']),
      true,
    )
    assert.equal(
      hasCapability({ resources: { subscribe: false } }, ['resources', 'subscribe']),
      false,
    )
    assert.equal(hasCapability({ resources: {} }, ['resources', 'subscribe']), false)
    assert.equal(hasCapability({ tools: null }, ['tools']), false)
    assert.equal(hasCapability(undefined, ['tools']), false)
    assert.equal(hasCapability({ tools: true }, ['tools', 'listChanged']), false)
  })
})
