import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { compileFilter } from './filter.ts'

describe('compileFilter', () => {
  test('admits every name when include is absent', () => {
    const visible = compileFilter()
    assert.equal(visible('anything'), true)
    assert.equal(visible('files__read_file'), true)
  })

  test('admits only names matching an include glob', () => {
    const visible = compileFilter(['read_*', 'echo'])
    assert.deepEqual(['read_file', 'echo', 'echo2', 'write_file'].map(visible), [
      true,
      true,
      false,
      false,
    ])
  })

  test('admits nothing when include is an empty list', () => {
    assert.equal(compileFilter([])('read_file'), false)
  })

  test('lets exclude win over include', () => {
    const visible = compileFilter(['*'], ['*write*', 'delete_*'])
    assert.deepEqual(['read_file', 'write_file', 'file_writer', 'delete_all'].map(visible), [
      true,
      false,
      false,
      false,
    ])
  })

  test('matches resource URIs with * inside one segment and ** across segments', () => {
    const visible = compileFilter(['file:///data/**'], ['file:///data/private/*'])
    assert.equal(visible('file:///data/a/b.txt'), true)
    assert.equal(visible('file:///data/.hidden'), true)
    assert.equal(visible('file:///data/private/key.pem'), false)
    assert.equal(visible('file:///etc/passwd'), false)
    assert.equal(compileFilter(['file:///data/*'])('file:///data/a/b.txt'), false)
  })

  test('treats dots in names as ordinary characters', () => {
    assert.equal(compileFilter(['*'])('.internal'), true)
    assert.equal(compileFilter(['github.*'])('github.create_issue'), true)
  })
})
