import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import type { Request } from '../protocol/model.ts'
import {
  compileUriFilter,
  globForJudgedUris,
  judgedTemplate,
  judgedUri,
  normaliseResourceUri,
  tryJudged,
  type UriRefusal,
  withJudgedUris,
} from './resource-uri.ts'

/** The filter of the attack: only the public folder, never anything private. */
const admits = compileUriFilter(['file://R/public/**'], ['**/private/**'])

/** Seen by the filter as the gateway sees it: judged, by its own and its namespaced form. */
function passesFilter(exposed: string): boolean {
  let judged: string
  try {
    judged = judgedUri(exposed)
  } catch {
    return false
  }
  const own = judged.startsWith('files+') ? judged.slice('files+'.length) : judged
  return admits([own, `files+${own}`])
}

function refusal(uri: string): UriRefusal | undefined {
  try {
    judgedUri(uri)
    return undefined
  } catch (error) {
    assert.ok(error instanceof BarbicanError)
    assert.equal(error.code, 'ERR_INVALID_PARAMS')
    return (error.data as { reason: UriRefusal }).reason
  }
}

/**
 * Traversal and encoding variants aimed at file://R/private/secret.txt from inside the public
 * folder: each is either refused or normalised to a URI the filter judges as private.
 */
const ATTACKS: readonly [uri: string, outcome: string][] = [
  ['file://R/public/../private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/%2e%2e/%70rivate/%73ecret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/%2E%2E/private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/.%2e/private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/%2e./private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/./../private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/a/../../private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public//../private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/a/..//..//private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public//private/secret.txt', 'file://r/public/private/secret.txt'],
  ['file://R/public///private//secret.txt', 'file://r/public/private/secret.txt'],
  ['file://R/public/Private/secret.txt', 'file://r/public/Private/secret.txt'],
  ['file://R/public/PRIVATE/secret.txt', 'file://r/public/PRIVATE/secret.txt'],
  ['file://R/public/%50rivate/secret.txt', 'file://r/public/Private/secret.txt'],
  ['file://R/public/%70%72%69%76%61%74%65/secret.txt', 'file://r/public/private/secret.txt'],
  ['FILE://R/public/../private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/PUBLIC/../private/secret.txt', 'file://r/private/secret.txt'],
  ['file://R/public/%2e%2e%2fprivate/secret.txt', 'refused:encoded-separator'],
  ['file://R/public/..%2Fprivate/secret.txt', 'refused:encoded-separator'],
  ['file://R/public/..%5Cprivate/secret.txt', 'refused:encoded-separator'],
  ['file://R/public/..%5cprivate%5csecret.txt', 'refused:encoded-separator'],
  ['file://R/public/..\\private\\secret.txt', 'refused:backslash'],
  ['file://R/public\\..\\private/secret.txt', 'refused:backslash'],
  ['file://R/public/secret.txt%00/../../private/secret.txt', 'refused:encoded-nul'],
  ['file://R/public/a\u0000/../../private/secret.txt', 'refused:control-character'],
  ['file://R/public/\t../private/secret.txt', 'refused:control-character'],
  ['file://R/public/..\n/private/secret.txt', 'refused:control-character'],
  [' file://R/public/../private/secret.txt', 'refused:control-character'],
  ['file://R/public/%252e%252e/private/secret.txt', 'refused:double-encoding'],
  ['file://R/public/%252F../private/secret.txt', 'refused:double-encoding'],
  ['file://R/public/%2/../private/secret.txt', 'refused:malformed-escape'],
  ['file://R/public/%zz/../private/secret.txt', 'refused:malformed-escape'],
  ['file://R/public/%', 'refused:malformed-escape'],
  ['public/../private/secret.txt', 'refused:not-absolute'],
  ['//R/public/../private/secret.txt', 'refused:not-absolute'],
  ['mem:public/../private/secret.txt', 'refused:opaque-dot-segment'],
  ['mem:public/%2e%2e/private', 'refused:opaque-dot-segment'],
]

describe('resource URI normalisation', () => {
  test(`the corpus holds at least 30 variants (${ATTACKS.length})`, () => {
    assert.ok(ATTACKS.length >= 30)
  })

  for (const [uri, outcome] of ATTACKS) {
    test(`${JSON.stringify(uri)} → ${outcome}, never admitted as public`, () => {
      if (outcome.startsWith('refused:')) {
        assert.equal(refusal(uri), outcome.slice('refused:'.length))
        assert.equal(tryJudged(uri), undefined)
      } else {
        assert.equal(judgedUri(uri), outcome)
        assert.equal(normaliseResourceUri(outcome), outcome, 'idempotent')
      }
      assert.equal(passesFilter(`files+${uri}`), false)
      assert.equal(passesFilter(uri), false)
    })
  }

  test('any text either normalises to a fixed point or is refused with ERR_INVALID_PARAMS', () => {
    // A seeded generator over the characters that matter, so a failure replays.
    let seed = 20
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    const pieces = ['a', 'Z', '/', '//', '.', '..', '%', '%2e', '%2F', '%5c', '%25', '%41', ':']
    const more = ['+', 'b+', '?', '#', '{x}', '\\', '\u0000', ' ', 'é', 'file:', 'mem:', '//R']
    const alphabet = [...pieces, ...more]
    for (let i = 0; i < 3000; i++) {
      let text = random() < 0.7 ? ['file://R/', 'b+mem://h/', 'mem:'][i % 3]! : ''
      const length = Math.floor(random() * 12)
      for (let j = 0; j < length; j++) text += alphabet[Math.floor(random() * alphabet.length)]
      let judged: string
      try {
        judged = judgedUri(text)
      } catch (error) {
        assert.ok(error instanceof BarbicanError, `${JSON.stringify(text)}: ${error}`)
        assert.equal(error.code, 'ERR_INVALID_PARAMS')
        continue
      }
      assert.equal(judgedUri(judged), judged, `not idempotent for ${JSON.stringify(text)}`)
      const path = judged.split(/[?#]/)[0]!
      assert.doesNotMatch(path, /\/\.\.?(\/|$)|\\|%2F|%5C/i, JSON.stringify(text))
      assert.ok(!judged.includes('\u0000'), JSON.stringify(text))
    }
  })

  test('leaves ordinary URIs as they are, and the filter admits the public ones', () => {
    for (const uri of [
      'test://static/resource/1',
      'memory://knowledge-graph',
      'urn:isbn:0451450523',
      'mem://x/a?b=1#frag',
      'file:///srv/data/report%20final.txt',
    ]) {
      assert.equal(judgedUri(uri), uri)
    }
    assert.equal(judgedUri('file://R/public/%41%7e.txt'), 'file://r/public/A~.txt')
    assert.equal(judgedUri('mem://Host/Path/%c3%a9'), 'mem://Host/Path/%C3%A9')
    assert.equal(passesFilter('file://R/public/notes/a.txt'), true)
    assert.equal(passesFilter('files+file://R/public/./notes//a.txt'), true)
  })

  test('keeps a namespace prefix as written and judges the URI behind it by its own scheme', () => {
    assert.equal(
      judgedUri('files+file://R/public/%2e%2e/%70rivate/%73ecret.txt'),
      'files+file://r/private/secret.txt',
    )
    assert.equal(judgedUri('My_Files+FILE://R/a'), 'My_Files+file://r/a')
    assert.equal(judgedUri('files+svn+ssh://Host/a/../b'), 'files+svn+ssh://Host/b')
    assert.equal(judgedUri('files+mem:a/b'), 'files+mem:a/b')
    assert.throws(() => judgedUri('files+file://R/%2F'), {
      code: 'ERR_INVALID_PARAMS',
      message: /encoded slash/,
    })
    assert.throws(() => judgedUri('files+mem:a/../b'), { message: /dot segments/ })
  })

  test('judges a template by stand-in values: one segment, or two when it spans "/"', () => {
    assert.equal(judgedTemplate('file:///data/{name}'), 'file:///data/%7B%7D')
    assert.equal(judgedTemplate('file:///{+path}'), 'file:///%7B%7D/%7B%7D')
    assert.equal(judgedTemplate('file:///data/../etc/{x}'), 'file:///etc/%7B%7D')
    const oneLevel = compileUriFilter(['file:///data/*'])
    assert.equal(oneLevel([judgedTemplate('file:///data/{name}')]), true)
    assert.equal(oneLevel([judgedTemplate('file:///data/{+path}')]), false)
    assert.equal(oneLevel([judgedTemplate('file:///{path}')]), false)
    assert.equal(compileUriFilter(['file:///data/**'])([judgedTemplate('file:///data/{+p}')]), true)
  })

  test('globs are read the way URIs are judged: scheme, and a special host, in lower case', () => {
    assert.equal(globForJudgedUris('FILE://R/Public/**'), 'file://r/Public/**')
    assert.equal(globForJudgedUris('files+file://R/x/*'), 'files+file://r/x/*')
    assert.equal(globForJudgedUris('mem://Host/**'), 'mem://Host/**')
    assert.equal(globForJudgedUris('**/private/**'), '**/private/**')
  })

  test('a request names its URIs in judged form; one without a judged form is left as sent', () => {
    const read: Request = {
      kind: 'request',
      id: 1,
      method: 'resources/read',
      params: { uri: 'files+file://R/public/%2e%2e/x' },
    }
    assert.equal(withJudgedUris(read, judgedUri).params?.uri, 'files+file://r/x')
    const bad = { ...read, params: { uri: 'files+file://R/a%2Fb' } }
    assert.equal(withJudgedUris(bad, judgedUri).params?.uri, 'files+file://R/a%2Fb')
    const listen: Request = {
      kind: 'request',
      id: 2,
      method: 'subscriptions/listen',
      params: { notifications: { resourceSubscriptions: ['files+file://R/./a', 7] } },
    }
    assert.deepEqual(withJudgedUris(listen, judgedUri).params?.notifications, {
      resourceSubscriptions: ['files+file://r/a', 7],
    })
  })
})
