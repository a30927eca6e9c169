import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { callOf } from '../../test/support/calls.ts'
import type { Catalog } from '../catalog/catalog.ts'
import type { BarbicanError } from '../common/errors.ts'
import type { GuardsConfig } from '../config/config.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import { compose } from './chain.ts'
import { guards } from './guards.ts'
import type { Reply } from './policy.ts'

const OFF: GuardsConfig = {
  arguments: 'off',
  output: 'off',
  oversize: 'truncate',
  redact: false,
  redactPatterns: [],
}

const tool: JsonObject = {
  name: 'echo',
  inputSchema: {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
  },
}

function catalogWith(...tools: JsonObject[]): Catalog {
  return { tools } as unknown as Catalog
}

/** Calls `name` through the guards with `result` as the upstream's answer. */
async function run(
  config: GuardsConfig,
  args: JsonObject,
  result: JsonObject,
  options: { catalog?: Catalog; log?: Logger } = {},
): Promise<{ reply: Reply; forwarded: boolean }> {
  let forwarded = false
  const chain = compose([guards(config)], async (call) => {
    forwarded = true
    return { kind: 'result', id: call.request.id, resultType: 'complete', result }
  })
  const reply = await chain(
    callOf(
      'tools/call',
      { name: 'echo', arguments: args },
      {
        route: {
          kind: 'unicast',
          upstream: 'u',
          original: 'echo',
          catalog: options.catalog ?? catalogWith(tool),
        },
        ...(options.log ? { log: options.log } : {}),
      },
    ),
  )
  return { reply, forwarded }
}

function recorder(): { log: Logger; lines: JsonObject[] } {
  const lines: JsonObject[] = []
  const log = {
    debug: () => {},
    info: (message: string, fields?: JsonObject) =>
      lines.push({ level: 'info', message, ...fields }),
    warn: (message: string, fields?: JsonObject) =>
      lines.push({ level: 'warn', message, ...fields }),
    error: () => {},
    child: () => log,
  } as unknown as Logger
  return { log, lines }
}

const text = (t: string) => ({ content: [{ type: 'text', text: t }] })

describe('guards policy', () => {
  test('enforce refuses arguments against the inputSchema before forwarding (draft-07 too)', async () => {
    await assert.rejects(
      run({ ...OFF, arguments: 'enforce' }, { text: 1 }, text('x')),
      (err: BarbicanError) => {
        assert.equal(err.code, 'ERR_INVALID_PARAMS')
        assert.deepEqual(err.data, {
          guard: 'arguments',
          tool: 'echo',
          errors: ['/text must be string'],
        })
        return true
      },
    )
    const ok = await run({ ...OFF, arguments: 'enforce' }, { text: 'a' }, text('a'))
    assert.equal(ok.forwarded, true)
  })

  test('warn forwards and logs', async () => {
    const { log, lines } = recorder()
    const { forwarded } = await run({ ...OFF, arguments: 'warn' }, {}, text('x'), { log })
    assert.equal(forwarded, true)
    assert.equal(lines[0]?.guard, 'arguments')
    assert.deepEqual(lines[0]?.errors, ["/ must have required property 'text'"])
  })

  test('a tool unknown to the catalog is not judged (the relay answers it)', async () => {
    const { forwarded } = await run({ ...OFF, arguments: 'enforce' }, { text: 1 }, text('x'), {
      catalog: catalogWith(),
    })
    assert.equal(forwarded, true)
  })

  test('a schema that cannot be compiled fails closed in enforce mode', async () => {
    const broken = { name: 'echo', inputSchema: { type: 'object', $ref: '#/nowhere' } }
    await assert.rejects(
      run({ ...OFF, arguments: 'enforce' }, {}, text('x'), { catalog: catalogWith(broken) }),
      /cannot be compiled/,
    )
  })

  test('output: a missing structuredContent is a mismatch; isError is never judged', async () => {
    const typed = { ...tool, outputSchema: { type: 'object', required: ['n'] } }
    const catalog = catalogWith(typed)
    await assert.rejects(run({ ...OFF, output: 'enforce' }, {}, text('x'), { catalog }), {
      code: 'ERR_RESULT_INVALID',
    })
    const failed = { ...text('boom'), isError: true }
    const { reply } = await run({ ...OFF, output: 'enforce' }, {}, failed, { catalog })
    assert.deepEqual(reply.kind === 'result' && reply.result, failed)
  })

  test('truncate cuts the last text blocks, drops what no longer fits, and adds a note', async () => {
    const result = {
      content: [
        { type: 'text', text: 'a'.repeat(300) },
        { type: 'text', text: 'b'.repeat(300) },
        { type: 'image', data: 'c'.repeat(300), mimeType: 'image/png' },
      ],
    }
    const { log, lines } = recorder()
    const { reply } = await run({ ...OFF, maxResultBytes: 500 }, {}, result, { log })
    assert.ok(reply.kind === 'result')
    const content = reply.result.content as { type: string; text?: string }[]
    assert.ok(Buffer.byteLength(JSON.stringify(reply.result)) <= 500)
    // The image went first (from the end), then the second text block was cut to fit.
    assert.deepEqual(
      content.map((c) => c.type),
      ['text', 'text', 'text'],
    )
    assert.equal(content[0]!.text, 'a'.repeat(300))
    assert.ok(content[1]!.text!.startsWith('bbb') && content[1]!.text!.length < 300)
    assert.match(content[2]!.text!, /cut from 1\d\d\d bytes/)
    assert.equal(lines[0]?.message, 'cut an oversize result')
  })

  test('the token limit is characters / 4; error mode refuses', async () => {
    const fits = await run({ ...OFF, maxResultTokens: 100 }, {}, text('x'.repeat(300)))
    assert.ok(fits.reply.kind === 'result')
    assert.equal((fits.reply.result.content as { text: string }[])[0]!.text.length, 300)
    await assert.rejects(
      run({ ...OFF, maxResultTokens: 100, oversize: 'error' }, {}, text('x'.repeat(400))),
      { code: 'ERR_RESULT_TOO_LARGE' },
    )
  })

  test('a result whose structuredContent alone is over the limit is refused, not mangled', async () => {
    const result = { ...text('short'), structuredContent: { big: 'z'.repeat(1000) } }
    await assert.rejects(run({ ...OFF, maxResultBytes: 200 }, {}, result), {
      code: 'ERR_RESULT_TOO_LARGE',
    })
  })

  test('redaction logs one line with the count per call', async () => {
    const { log, lines } = recorder()
    const result = {
      content: [{ type: 'text', text: 'AKIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPLF' }],
      structuredContent: { token: 'Bearer abcdefghijklmnopqrstuvwxyz' },
    }
    const { reply } = await run({ ...OFF, redact: true }, {}, result, { log })
    assert.ok(reply.kind === 'result')
    assert.deepEqual(reply.result.structuredContent, { token: '[REDACTED:bearer]' })
    assert.deepEqual(lines, [
      {
        level: 'info',
        message: 'redacted secrets in a result',
        tool: 'echo',
        count: 3,
        kinds: { 'aws-access-key': 2, bearer: 1 },
      },
    ])
  })
})
