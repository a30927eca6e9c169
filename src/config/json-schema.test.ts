import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { parse } from 'yaml'
import { configJsonSchema, configJsonSchemaText } from './json-schema.ts'

const committed = fileURLToPath(new URL('../../schema/config.json', import.meta.url))
const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url))

/** Every node under a `properties` map, with its key path. */
function properties(node: unknown, path = ''): [string, Record<string, unknown>][] {
  if (node === null || typeof node !== 'object') return []
  const out: [string, Record<string, unknown>][] = []
  for (const [key, child] of Object.entries(node)) {
    if (key === 'properties' && child && typeof child === 'object') {
      for (const [name, schema] of Object.entries(child)) {
        out.push([`${path}.${name}`, schema as Record<string, unknown>])
        out.push(...properties(schema, `${path}.${name}`))
      }
    } else {
      out.push(...properties(child, path))
    }
  }
  return out
}

describe('schema/config.json', () => {
  test('is up to date with src/config/schema.ts (run scripts/emit-config-schema.ts if not)', () => {
    assert.equal(readFileSync(committed, 'utf8'), configJsonSchemaText())
  })

  test('is JSON Schema 2020-12 with a title and description on every key', () => {
    const schema = configJsonSchema()
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema')
    const keys = properties(schema)
    assert.ok(keys.length > 40, `only ${keys.length} keys`)
    const bare = keys.filter(
      ([, s]) => typeof s.title !== 'string' || typeof s.description !== 'string',
    )
    assert.deepEqual(
      bare.map(([path]) => path),
      [],
    )
  })

  test('accepts the native fixtures and rejects an unknown key, as editors will', () => {
    const ajv = new Ajv2020({ strict: false })
    const validate = ajv.compile(configJsonSchema())
    const yaml = parse(readFileSync(`${fixtures}native.yaml`, 'utf8'))
    assert.equal(validate(yaml), true, JSON.stringify(validate.errors))
    const json = JSON.parse(readFileSync(`${fixtures}native.json`, 'utf8'))
    assert.equal(validate(json), true, JSON.stringify(validate.errors))
    assert.equal(validate({ upstreams: { a: { command: 'x', comand: 'y' } } }), false)
  })
})
