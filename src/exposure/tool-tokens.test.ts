import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  loadTokenCounter,
  modelView,
  overBudget,
  TOKEN_ENCODING,
  toolCosts,
} from './tool-tokens.ts'

describe('tool token costs', () => {
  test('counts name, description and input schema as the model sees them, nothing else', async () => {
    const tool = {
      name: 'read_file',
      description: 'Read a text file.',
      inputSchema: { type: 'object', properties: { path: { type: 'string' } } },
      annotations: { readOnlyHint: true },
      _meta: { ignored: 'x'.repeat(500) },
    }
    assert.equal(
      modelView(tool),
      '{"name":"read_file","description":"Read a text file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}',
    )
    const count = await loadTokenCounter()
    const { tools, total } = await toolCosts([tool])
    assert.equal(tools[0]?.tokens, count(modelView(tool)))
    assert.equal(total, tools[0]?.tokens)
    // o200k_base splits that JSON into a few dozen tokens, far fewer than its 113 characters.
    assert.ok(total > 15 && total < 60, `${total}`)
    assert.equal(TOKEN_ENCODING, 'o200k_base')
  })

  test('a known text has the count o200k_base gives it', async () => {
    const count = await loadTokenCounter()
    assert.equal(count('hello world'), 2)
  })

  test('a longer description costs more, and the total is the sum', async () => {
    const short = { name: 'a', description: 'Echo.' }
    const long = { name: 'b', description: 'Echo the given text back. '.repeat(20) }
    const { tools, total } = await toolCosts([short, long])
    assert.ok((tools[1]?.tokens ?? 0) > (tools[0]?.tokens ?? 0) * 5)
    assert.equal(total, (tools[0]?.tokens ?? 0) + (tools[1]?.tokens ?? 0))
  })

  test('special-token text from a server is counted as text, never thrown on', async () => {
    const { total } = await toolCosts([{ name: 'x', description: 'stop <|endoftext|> here' }])
    assert.ok(total > 5)
  })

  test('warns only over a budget that is set', () => {
    assert.equal(overBudget('default', 900, undefined), undefined)
    assert.equal(overBudget('default', 900, 900), undefined)
    assert.match(
      overBudget('default', 901, 900) ?? '',
      /virtual server "default" lists tools worth 901 tokens \(o200k_base\), over its tokenBudget of 900/,
    )
  })
})
