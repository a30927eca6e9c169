import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { buildCatalog, type ItemRules, type UpstreamLists } from '../catalog/catalog.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { codeFunctions, declarations, runCodeTool } from './code-catalog.ts'

const all: ItemRules = { filter: () => true, rename: () => undefined, description: () => undefined }

function upstream(name: string, tools: JsonObject[]): UpstreamLists {
  return { name, tools, prompts: [], resources: [], resourceTemplates: [] }
}

const READ: JsonObject = {
  name: 'read-file',
  description: 'Reads a file.\nWhole.',
  inputSchema: {
    type: 'object',
    properties: {
      path: { type: 'string', description: 'Where it is */ evil' },
      'max-bytes': { type: 'integer' },
      mode: { enum: ['text', 'base64'] },
      tags: { type: 'array', items: { type: 'string' } },
      meta: { type: 'object', additionalProperties: { type: 'number' } },
      nullable: { type: ['string', 'null'] },
    },
    required: ['path'],
  },
  outputSchema: { type: 'object', properties: { content: { type: 'string' } } },
}

const catalog = buildCatalog(
  [
    upstream('my-files', [READ, { name: '2fa', inputSchema: { type: 'object' } }]),
    upstream('JSON', [{ name: 'parse', inputSchema: { type: 'object' } }]),
  ],
  { namespacing: { mode: 'always', separator: '__' }, tools: all, prompts: all, resources: all },
)

describe('the catalog as a program sees it', () => {
  test('one namespace per upstream, one identifier per tool, the exposed name kept', () => {
    assert.deepEqual(codeFunctions(catalog), [
      { namespace: 'my_files', name: 'read_file', tool: 'my-files__read-file' },
      { namespace: 'my_files', name: '_2fa', tool: 'my-files__2fa' },
      // An upstream named after a global keeps the global usable.
      { namespace: 'JSON_', name: 'parse', tool: 'JSON__parse' },
    ])
  })

  test('declarations render the schemas as TypeScript, comments made safe', () => {
    const text = declarations(catalog, codeFunctions(catalog))
    assert.equal(
      text.split('\n').slice(0, 12).join('\n'),
      [
        'declare namespace my_files {',
        '  /** Reads a file. Whole. */',
        '  function read_file(args: {',
        '    path: string; /** Where it is * / evil */',
        '    "max-bytes"?: number;',
        '    mode?: "text" | "base64";',
        '    tags?: string[];',
        '    meta?: Record<string, number>;',
        '    nullable?: string | null;',
        '  }): Promise<{',
        '    content?: string;',
        '  }>',
      ].join('\n'),
    )
    assert.match(text, /function _2fa\(args: \{\}\): Promise<any>/)
    assert.match(text, /declare namespace JSON_ \{/)
  })

  test('run_code takes one code string and carries the declarations', () => {
    const tool = runCodeTool(catalog, codeFunctions(catalog))
    assert.equal(tool.name, 'run_code')
    assert.deepEqual((tool.inputSchema as JsonObject).required, ['code'])
    assert.match(String(tool.description), /```ts\ndeclare namespace my_files/)
  })
})
