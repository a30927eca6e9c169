import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  encodeHeaderValue,
  modernCapabilities,
  modernHeaders,
  withEnvelope,
  xMcpHeaderProblem,
} from './envelope.ts'
import { decodeHeaderValue, paramHeaderMismatch } from './param-headers.ts'

describe('2026 envelope and headers', () => {
  test('maps legacy capabilities to their 2026 form', () => {
    assert.deepEqual(
      modernCapabilities({
        roots: { listChanged: true },
        elicitation: {},
        sampling: {},
        tasks: { list: {} },
      }),
      { roots: {}, elicitation: { form: {} }, sampling: {} },
    )
  })

  test('writes the envelope into _meta and keeps other _meta members', () => {
    const params = withEnvelope(
      { name: 't', _meta: { progressToken: 3 } },
      {
        clientCapabilities: {},
        clientInfo: { name: 'b', version: '1' },
        logLevel: 'info',
      },
    )
    assert.deepEqual(params._meta, {
      progressToken: 3,
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'b', version: '1' },
      'io.modelcontextprotocol/logLevel': 'info',
    })
  })

  test('mirrors method, name and x-mcp-header arguments, base64-encoding unsafe values', () => {
    const schema = {
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        n: { type: 'integer', 'x-mcp-header': 'N' },
      },
    }
    const headers = modernHeaders(
      'tools/call',
      { name: 'wetter', arguments: { region: 'Zürich', n: 4 } },
      schema,
    )
    assert.deepEqual(headers, {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'wetter',
      'mcp-param-region': `=?base64?${Buffer.from('Zürich').toString('base64')}?=`,
      'mcp-param-n': '4',
    })
    assert.equal(decodeHeaderValue(encodeHeaderValue(' padded ')), ' padded ')
  })

  test('inbound Mcp-Param headers must agree with the arguments', () => {
    const schema = {
      type: 'object',
      properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
    }
    assert.equal(
      paramHeaderMismatch({ 'mcp-param-region': 'eu' }, schema, { region: 'eu' }),
      undefined,
    )
    assert.match(
      paramHeaderMismatch({ 'mcp-param-region': 'us' }, schema, { region: 'eu' }) ?? '',
      /mismatch/,
    )
    assert.match(paramHeaderMismatch({}, schema, { region: 'eu' }) ?? '', /required/)
    assert.match(
      paramHeaderMismatch({ 'mcp-param-region': '=?base64?ZXU?=' }, schema, { region: 'eu' }) ?? '',
      /Malformed/,
    )
    assert.equal(
      paramHeaderMismatch({ 'mcp-param-region': '=?base64?ZXU=?=' }, schema, { region: 'eu' }),
      undefined,
    )
    assert.equal(paramHeaderMismatch({}, schema, {}), undefined)
  })
})

describe('x-mcp-header annotations', () => {
  const prop = (type: string, header: unknown) => ({ type, 'x-mcp-header': header })
  test('accept tokens on string, integer and boolean properties', () => {
    const schema = {
      type: 'object',
      properties: { a: prop('string', 'A'), b: prop('integer', 'B'), c: prop('boolean', 'C') },
    }
    assert.equal(xMcpHeaderProblem(schema), undefined)
  })

  test('refuse empty or non-token names, other types, duplicates and nested placement', () => {
    const one = (p: object) => ({ type: 'object', properties: { a: p } })
    assert.ok(xMcpHeaderProblem(one(prop('string', ''))))
    assert.ok(xMcpHeaderProblem(one(prop('string', 'has space'))))
    assert.ok(xMcpHeaderProblem(one(prop('number', 'N'))))
    assert.ok(xMcpHeaderProblem(one(prop('object', 'O'))))
    assert.ok(
      xMcpHeaderProblem({
        type: 'object',
        properties: { a: prop('string', 'X'), b: prop('string', 'x') },
      }),
    )
    assert.ok(
      xMcpHeaderProblem({
        type: 'object',
        properties: { a: { type: 'array', items: prop('string', 'I') } },
      }),
    )
  })
})
