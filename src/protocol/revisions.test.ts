import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { hasDef, specSchemaDir } from '../../test/support/schema.ts'
import {
  eraOf,
  isRevision,
  LEGACY_REVISIONS,
  MODERN_REVISIONS,
  negotiateLegacy,
  REVISIONS,
  TRAITS,
} from './revisions.ts'

function schemaDialect(revision: string): string {
  const file = join(specSchemaDir(), revision, 'schema.json')
  return String((JSON.parse(readFileSync(file, 'utf8')) as { $schema: unknown }).$schema)
}

describe('revision traits against the official schemas', () => {
  for (const revision of REVISIONS) {
    test(`${revision}: era, dialect and batching match its schema`, () => {
      // The handshake era has initialize; the modern era has server/discover instead.
      assert.equal(hasDef(revision, 'InitializeRequest'), eraOf(revision) === 'legacy')
      assert.equal(hasDef(revision, 'DiscoverRequest'), eraOf(revision) === 'modern')
      assert.equal(TRAITS[revision].era, eraOf(revision))
      const dialect = schemaDialect(revision).includes('2020-12') ? '2020-12' : 'draft-07'
      assert.equal(TRAITS[revision].schemaDialect, dialect)
      // Only 2025-03-26 defines batch messages.
      assert.equal(TRAITS[revision].batching, hasDef(revision, 'JSONRPCBatchRequest'))
      assert.equal(
        TRAITS[revision].resourceNotFoundCode,
        eraOf(revision) === 'modern' ? -32602 : -32002,
      )
    })
  }

  test('splits the revisions into legacy and modern without overlap', () => {
    assert.deepEqual([...LEGACY_REVISIONS, ...MODERN_REVISIONS], [...REVISIONS])
  })
})

describe('negotiateLegacy', () => {
  test('answers a known legacy revision with itself', () => {
    for (const revision of LEGACY_REVISIONS) assert.equal(negotiateLegacy(revision), revision)
  })

  test('answers an unknown, modern or malformed request with the newest legacy revision', () => {
    for (const requested of ['2099-01-01', '2026-07-28', 42, undefined, null]) {
      assert.equal(negotiateLegacy(requested), '2025-11-25')
    }
  })

  test('treats the pre-release 2024-10-07 as 2024-11-05', () => {
    assert.equal(negotiateLegacy('2024-10-07'), '2024-11-05')
    assert.equal(isRevision('2024-10-07'), false)
  })
})
