import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { buildCatalog, type CatalogRules, type ItemRules, type UpstreamLists } from './catalog.ts'
import type { NamespaceMode } from './names.ts'
import { splitUri } from './names.ts'

const all: ItemRules = { filter: () => true, rename: () => undefined, description: () => undefined }

function rules(mode: NamespaceMode, tools: Partial<ItemRules> = {}): CatalogRules {
  return {
    namespacing: { mode, separator: '__' },
    tools: { ...all, ...tools },
    prompts: all,
    resources: all,
  }
}

function lists(name: string, tools: string[], resources: string[] = []): UpstreamLists {
  return {
    name,
    tools: tools.map(
      (t): JsonObject => ({
        name: t,
        description: `${t} of ${name}`,
        inputSchema: { type: 'object' },
      }),
    ),
    prompts: [],
    resources: resources.map((uri): JsonObject => ({ uri, name: uri })),
    resourceTemplates: [],
  }
}

const upstreams = [
  lists('files', ['read', 'write'], ['file:///a']),
  lists('web', ['read', 'fetch'], ['https://x']),
]

describe('the catalog of a virtual server', () => {
  test('always: every name is prefixed, in configuration then upstream order', () => {
    const c = buildCatalog(upstreams, rules('always'))
    assert.deepEqual(
      c.tools.map((t) => t.name),
      ['files__read', 'files__write', 'web__read', 'web__fetch'],
    )
    assert.deepEqual(c.toolTargets.get('web__read'), { upstream: 'web', original: 'read' })
    assert.deepEqual(
      c.resources.map((r) => r.uri),
      ['files+file:///a', 'web+https://x'],
    )
    assert.deepEqual(c.conflicts, [])
  })

  test('on-conflict: only shared names are prefixed', () => {
    const c = buildCatalog(upstreams, rules('on-conflict'))
    assert.deepEqual(
      c.tools.map((t) => t.name),
      ['files__read', 'write', 'web__read', 'fetch'],
    )
  })

  test('never: a clash is reported, the first upstream keeps the name, nothing is shadowed silently', () => {
    const c = buildCatalog(upstreams, rules('never'))
    assert.deepEqual(
      c.tools.map((t) => t.name),
      ['read', 'write', 'fetch'],
    )
    assert.deepEqual(c.toolTargets.get('read'), { upstream: 'files', original: 'read' })
    assert.deepEqual(c.conflicts, [{ kind: 'tool', name: 'read', upstreams: ['files', 'web'] }])
  })

  test('filters, renames and description overrides apply per upstream', () => {
    const c = buildCatalog(
      upstreams,
      rules('always', {
        filter: (name, upstream) => !(upstream === 'web' && name === 'fetch'),
        rename: (name, upstream) => (upstream === 'files' && name === 'read' ? 'cat' : undefined),
        description: (exposed) => (exposed === 'files__cat' ? 'Prints a file' : undefined),
      }),
    )
    assert.deepEqual(
      c.tools.map((t) => t.name),
      ['files__cat', 'files__write', 'web__read'],
    )
    assert.equal(c.tools[0]?.description, 'Prints a file')
    assert.deepEqual(c.toolTargets.get('files__cat'), { upstream: 'files', original: 'read' })
    assert.equal(c.toolTargets.has('web__fetch'), false)
  })

  test('generated names that break the spec tool-name rules are held back, not exposed', () => {
    const c = buildCatalog([lists('long', ['x'.repeat(126)])], rules('always'))
    assert.deepEqual(c.tools, [])
    assert.deepEqual(c.heldBack, [
      {
        kind: 'tool',
        upstream: 'long',
        original: 'x'.repeat(126),
        exposed: `long__${'x'.repeat(126)}`,
        reason: 'the exposed name is 132 characters long, over 128',
      },
    ])
  })

  test('upstream names outside the MCP name rules are held back with the reason', () => {
    const hostile = ['a\u001b[31m', 'b\nc', 'd\u0000', '', 'x'.repeat(129), 'read_fil\u0435', 'ok']
    const c = buildCatalog(
      [{ ...lists('h', hostile), prompts: hostile.map((name): JsonObject => ({ name })) }],
      rules('on-conflict'),
    )
    assert.deepEqual(
      c.tools.map((t) => t.name),
      ['ok'],
    )
    assert.deepEqual(
      c.prompts.map((p) => p.name),
      ['ok'],
    )
    assert.deepEqual(
      c.heldBack.filter((h) => h.kind === 'prompt').map((h) => h.reason),
      [
        'the name contains a control or invisible character (U+001B)',
        'the name contains a control or invisible character (U+000A)',
        'the name contains a control or invisible character (U+0000)',
        'the name is empty',
        'the name is 129 characters long, over 128',
        'the name contains U+0435, outside A-Z a-z 0-9 _ - .',
      ],
    )
    assert.equal(c.toolTargets.has('b\nc'), false)
    assert.equal(c.promptTargets.has(''), false)
  })

  test('leaves upstream objects untouched and keeps unknown members', () => {
    const source = lists('files', ['read'])
    source.tools[0]!.annotations = { readOnlyHint: true }
    source.tools[0]!.futureField = { kept: true }
    const frozen = structuredClone(source)
    const c = buildCatalog([source], rules('always'))
    assert.deepEqual(source, frozen)
    assert.deepEqual(c.tools[0]?.futureField, { kept: true })
    assert.deepEqual(c.tools[0]?.annotations, { readOnlyHint: true })
  })

  test('namespaced resource URIs split back exactly', () => {
    const names = new Set(['files', 'web'])
    assert.deepEqual(splitUri('files+file:///a+b', names), {
      upstream: 'files',
      uri: 'file:///a+b',
    })
    assert.equal(splitUri('other+file:///a', names), undefined)
    assert.equal(splitUri('file:///a', names), undefined)
  })
})
