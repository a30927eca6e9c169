import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { HeadRerank, type RerankTuning } from './tool-search-rerank.ts'

/** Nine tools that hold the common words `get` and `list`, and one that holds `elevation`. */
function catalogue(): HeadRerank {
  const head = new HeadRerank()
  for (let i = 0; i < 9; i++) head.add(new Set(['get', 'list', `thing${i}`]), ['common'])
  head.add(new Set(['elevation', 'point']), ['maps'])
  return head
}

const TUNING: RerankTuning = { depth: 20, weight: 4, server: 0, idf: true }
const ASKED = [['get'], ['list'], ['elevation']] as const
const tied = () => [0, 9, 1].map((id) => ({ id, score: 1 }))

describe('the re-rank of the head', () => {
  test("weighs a query's rare word above its common ones (idf)", () => {
    const byIdf = tied()
    catalogue().rerank(byIdf, ASKED, [], TUNING)
    assert.equal(byIdf[0]!.id, 9, 'the tool holding the rare word comes first')
    const alike = tied()
    catalogue().rerank(alike, ASKED, [], { ...TUNING, idf: false })
    assert.equal(alike[0]!.id, 0, 'counted alike, two common words beat one rare word')
  })

  test('a word through its synonyms or as a prefix counts as covered', () => {
    const head = new HeadRerank()
    head.add(new Set(['fetch']), ['a'])
    head.add(new Set(['elevations']), ['b'])
    head.add(new Set(['other']), ['c'])
    const results = [2, 0, 1].map((id) => ({ id, score: 1 }))
    head.rerank(results, [['get', 'fetch'], ['elevation']], [], TUNING)
    assert.deepEqual(results.map((r) => r.id).sort(), [0, 1, 2])
    assert.equal(results[2]!.id, 2, 'the tool covering neither word comes last')
  })

  test('favours the server the query names, and leaves the tail past `depth` in place', () => {
    const head = catalogue()
    const results = [0, 1, 9].map((id, i) => ({ id, score: 3 - i / 2 }))
    head.rerank(results, [['thing5']], ['on', 'maps'], {
      ...TUNING,
      weight: 0,
      server: 2,
      depth: 3,
    })
    assert.equal(results[0]!.id, 9)
    const shallow = [0, 1, 9].map((id, i) => ({ id, score: 3 - i }))
    head.rerank(shallow, [['elevation']], ['maps'], { ...TUNING, depth: 2 })
    assert.deepEqual(
      shallow.map((r) => r.id),
      [0, 1, 9],
    )
  })

  test('changes nothing when the query has no words or the tuning is off', () => {
    const results = tied()
    catalogue().rerank(results, [], ['maps'], TUNING)
    catalogue().rerank(results, ASKED, ['maps'], { ...TUNING, weight: 0, server: 0 })
    assert.deepEqual(
      results.map((r) => r.id),
      [0, 9, 1],
    )
  })
})
