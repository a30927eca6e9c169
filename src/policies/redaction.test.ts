import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { type RedactionCounts, Redactor } from './redaction.ts'

const KEY_BLOCK = [
  '-----BEGIN OPENSSH PRIVATE KEY-----',
  'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW',
  '-----END OPENSSH PRIVATE KEY-----',
].join('\n')

describe('Redactor', () => {
  const samples: [kind: string, secret: string][] = [
    ['private-key', KEY_BLOCK],
    ['aws-access-key', 'AKIAIOSFODNN7EXAMPLE'],
    ['github-token', `ghp_${'a1B2'.repeat(9)}`],
    ['github-token', `github_pat_${'x'.repeat(30)}`],
    ['jwt', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.sig-part_123'],
  ]
  for (const [kind, secret] of samples) {
    test(`redacts a ${kind} and counts it`, () => {
      const counts: RedactionCounts = new Map()
      const out = new Redactor().redact(`before ${secret} after`, counts)
      assert.equal(out, `before [REDACTED:${kind}] after`)
      assert.deepEqual([...counts], [[kind, 1]])
    })
  }

  test('redacts the token of a bearer header, whatever its case', () => {
    const counts: RedactionCounts = new Map()
    const out = new Redactor().redact('authorization: bearer abcdefghijklmnop.qrs', counts)
    assert.equal(out, 'authorization: [REDACTED:bearer]')
    assert.equal(counts.get('bearer'), 1)
  })

  test('leaves ordinary text alone', () => {
    const counts: RedactionCounts = new Map()
    const text = 'AKIA is a prefix; Bearer short; eyJ alone; ghp_short; -----BEGIN PUBLIC KEY-----'
    assert.equal(new Redactor().redact(text, counts), text)
    assert.equal(counts.size, 0)
  })

  test('extra patterns are redacted as custom-N, every match counted', () => {
    const counts: RedactionCounts = new Map()
    const redactor = new Redactor(['ticket-[0-9]+', 'secret'])
    assert.equal(
      redactor.redact('ticket-1 ticket-22 secret', counts),
      '[REDACTED:custom-1] [REDACTED:custom-1] [REDACTED:custom-2]',
    )
    assert.deepEqual(Object.fromEntries(counts), { 'custom-1': 2, 'custom-2': 1 })
  })

  test('redactDeep reaches nested strings and keeps unchanged objects as they are', () => {
    const counts: RedactionCounts = new Map()
    const clean = { a: [1, 'x'] }
    const value = { clean, deep: { list: ['AKIAIOSFODNN7EXAMPLE'] } }
    const out = new Redactor().redactDeep(value, counts) as typeof value
    assert.deepEqual(out.deep.list, ['[REDACTED:aws-access-key]'])
    assert.equal(out.clean, clean)
    assert.equal(new Redactor().redactDeep(clean, counts), clean)
  })

  test('leaves base64 payloads of images, audio and blobs alone', () => {
    const counts: RedactionCounts = new Map()
    const key = 'AKIAIOSFODNN7EXAMPLE'
    const value = {
      content: [
        { type: 'image', data: key, mimeType: 'image/png' },
        { type: 'audio', data: key, mimeType: 'audio/wav' },
        { type: 'resource', resource: { uri: 'file:///k', blob: key, text: key } },
      ],
    }
    const out = new Redactor().redactDeep(value, counts) as typeof value
    assert.equal(out.content[0]!.data, key)
    assert.equal(out.content[1]!.data, key)
    assert.deepEqual(out.content[2]!.resource, {
      uri: 'file:///k',
      blob: key,
      text: '[REDACTED:aws-access-key]',
    })
  })
})
