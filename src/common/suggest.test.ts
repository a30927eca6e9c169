import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { closest, didYouMean, editDistance } from './suggest.ts'

describe('did you mean', () => {
  test('a transposition is one edit, as are insertion, deletion and substitution', () => {
    assert.equal(editDistance('lsit', 'list'), 1)
    assert.equal(editDistance('comand', 'command'), 1)
    assert.equal(editDistance('serv', 'serve'), 1)
    assert.equal(editDistance('chek', 'check'), 1)
    assert.equal(editDistance('scna', 'scan'), 1)
    assert.equal(editDistance('', 'abc'), 3)
  })

  test('suggests the closest known word, case-insensitively', () => {
    assert.equal(closest('SERVE', ['serve', 'stdio']), 'serve')
    assert.equal(closest('histroy', ['list', 'history']), 'history')
    assert.equal(closest('confg', ['config', 'listen']), 'config')
    assert.equal(didYouMean('lsit', ['list', 'diff']), ' (did you mean "list"?)')
  })

  test('suggests nothing for a word that is not close, nor for a short one far off', () => {
    assert.equal(closest('deploy', ['serve', 'stdio', 'check']), undefined)
    assert.equal(closest('x', ['ls']), undefined)
    assert.equal(didYouMean('zzz', ['list']), '')
  })
})
