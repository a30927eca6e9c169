import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { getPromptResult, readResourceResult, withExposedUris } from './adapted-tools.ts'

describe('resources and prompts as tool results', () => {
  test('resource links and embedded resources get the URI this server reads them by', async () => {
    const result = {
      content: [
        { type: 'text', text: 'two links' },
        { type: 'resource_link', uri: 'demo://a', name: 'a' },
        { type: 'resource', resource: { uri: 'demo://b', text: 'b' } },
      ],
    }
    const rewritten = await withExposedUris(result, async (uri) => `everything+${uri}`)
    assert.deepEqual(rewritten.content, [
      { type: 'text', text: 'two links' },
      { type: 'resource_link', uri: 'everything+demo://a', name: 'a' },
      { type: 'resource', resource: { uri: 'everything+demo://b', text: 'b' } },
    ])
    assert.equal(await withExposedUris(result, async (uri) => uri), result, 'unchanged as is')
  })

  test('a read becomes embedded resources; a prompt its messages, role first', () => {
    assert.deepEqual(readResourceResult({ contents: [{ uri: 'x://1', text: 't' }] }), {
      content: [{ type: 'resource', resource: { uri: 'x://1', text: 't' } }],
    })
    const image = { type: 'image', data: 'AAAA', mimeType: 'image/png' }
    assert.deepEqual(
      getPromptResult({
        description: 'Weather',
        messages: [
          { role: 'user', content: { type: 'text', text: 'Lyon?' } },
          { role: 'assistant', content: image },
        ],
      }).content,
      [
        { type: 'text', text: 'Weather' },
        { type: 'text', text: '[user] Lyon?' },
        { type: 'text', text: '[assistant]' },
        image,
      ],
    )
  })
})
