// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} placeholders
import assert from 'node:assert/strict'
import { homedir } from 'node:os'
import { describe, test } from 'node:test'
import { formatKeyPath } from './config-error.ts'
import { interpolate } from './interpolate.ts'

const env = { TOKEN: 'abc', EMPTY: '', HOST: 'example.com' }

function one(text: string, context = { env }) {
  const result = interpolate({ value: text }, context)
  return { value: (result.value as { value: string }).value, issues: result.issues }
}

describe('interpolate', () => {
  test('replaces ${VAR} anywhere in a string, several times', () => {
    assert.equal(
      one('Bearer ${TOKEN} for ${HOST}/${TOKEN}').value,
      'Bearer abc for example.com/abc',
    )
  })

  test('uses the default of ${VAR:-default} when the variable is unset or empty', () => {
    assert.equal(one('${MISSING:-anon}').value, 'anon')
    assert.equal(one('${EMPTY:-anon}').value, 'anon')
    assert.equal(one('${TOKEN:-anon}').value, 'abc')
    assert.equal(one('${MISSING:-}').value, '')
  })

  test('keeps an empty variable as set when no default is given', () => {
    assert.deepEqual(one('[${EMPTY}]'), { value: '[]', issues: [] })
  })

  test('reads $${ as a literal ${ and does not substitute after it', () => {
    assert.equal(one('cost: $${TOKEN} and ${TOKEN}').value, 'cost: ${TOKEN} and abc')
  })

  test('accepts the editor forms ${env:VAR}, ${userHome} and ${workspaceFolder}', () => {
    assert.equal(one('${env:TOKEN}').value, 'abc')
    assert.equal(one('${userHome}/x').value, `${homedir()}/x`)
    assert.equal(
      one('${workspaceFolder}/m.json', { env, workspaceFolder: '/p' } as never).value,
      '/p/m.json',
    )
  })

  test('reports every missing variable with the key path and the variable name', () => {
    const result = interpolate(
      { upstreams: { files: { args: ['-x', '${ROOT}'], env: { KEY: '${API_KEY}' } } } },
      { env: {} },
    )
    assert.deepEqual(
      result.issues.map((issue) => `${formatKeyPath(issue.path)}: ${issue.message}`),
      [
        'upstreams.files.args[1]: needs environment variable ROOT, which is not set (set it, or write ${ROOT:-default})',
        'upstreams.files.env.KEY: needs environment variable API_KEY, which is not set (set it, or write ${API_KEY:-default})',
      ],
    )
  })

  test('refuses VS Code input prompts, naming the key and suggesting a variable', () => {
    const { issues } = one('${input:perplexity-key}')
    assert.equal(issues.length, 1)
    assert.deepEqual(issues[0]?.path, ['value'])
    assert.match(
      issues[0]?.message ?? '',
      /\$\{input:perplexity-key\}.*VS Code input prompt.*\$\{PERPLEXITY_KEY\}/,
    )
  })

  test('rejects an unclosed or malformed placeholder instead of passing it through', () => {
    assert.match(one('${TOKEN').issues[0]?.message ?? '', /without its closing/)
    assert.match(
      one('${not a name}').issues[0]?.message ?? '',
      /not a placeholder Barbican understands/,
    )
    assert.match(one('${config:x}').issues[0]?.message ?? '', /not a placeholder/)
  })

  test('leaves keys, numbers, booleans and null untouched', () => {
    const input = { '${TOKEN}': 1, flag: true, none: null, list: [2, '${TOKEN}'] }
    assert.deepEqual(interpolate(input, { env }).value, {
      '${TOKEN}': 1,
      flag: true,
      none: null,
      list: [2, 'abc'],
    })
  })
})
