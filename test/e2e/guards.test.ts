/**
 * Quotas and guards seen by real clients in both eras: the official SDK client in a legacy
 * session, and 2026-07-28 stateless POSTs. One gateway enforces (rate limit, argument and output
 * schemas, size cut, redaction), one only warns; both front the guards fixture over stdio.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { type Logger, silentLogger } from '../../src/telemetry/log.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

const fixture = fileURLToPath(new URL('../fixtures/guards-upstream.ts', import.meta.url))

type Json = Record<string, unknown>

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean } & Json

interface Outcome {
  readonly result?: ToolResult | undefined
  readonly error?: { code: number; message: string; data?: Json | undefined } | undefined
  /** HTTP status and Retry-After of a 2026-07-28 call. */
  readonly status?: number
  readonly retryAfter?: string | null
}

type Era = (url: string) => Promise<{
  call: (name: string, args: Json) => Promise<Outcome>
  close: () => Promise<void>
}>

const legacy: Era = async (url) => {
  const client = new Client({ name: 'guards-e2e', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  await client.listTools() // the SDK client checks structuredContent against what it listed
  return {
    call: async (name, args) => {
      try {
        return { result: (await client.callTool({ name, arguments: args })) as ToolResult }
      } catch (err) {
        if (!(err instanceof McpError)) throw err
        return { error: { code: err.code, message: err.message, data: err.data as Json } }
      }
    },
    close: () => client.close(),
  }
}

const modern: Era = async (url) => {
  let nextId = 1
  return {
    call: async (name, args) => {
      const { status, headers, text, final } = await postStatelessToolCall(url, {
        name,
        arguments: args,
        id: nextId++,
      })
      assert.ok(final, `no response: ${text}`)
      return {
        ...(final.result ? { result: final.result as ToolResult } : {}),
        ...(final.error ? { error: final.error as Outcome['error'] } : {}),
        status,
        retryAfter: headers.get('retry-after'),
      }
    },
    close: async () => {},
  }
}

const ERAS = { 'legacy session': legacy, '2026-07-28 stateless': modern }

const AWS_KEY = 'AKIAIOSFODNN7EXAMPLE'
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ'

/** A logger that keeps every line, to see what the guards reported. */
function recordingLogger(lines: Json[]): Logger {
  const make = (fields: Json): Logger => {
    const at =
      (level: string) =>
      (message: string, more?: Json): void => {
        lines.push({ level, message, ...fields, ...more })
      }
    return {
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      child: (more) => make({ ...fields, ...more }),
    } as Logger
  }
  return make({})
}

async function start(extra: Json, log: Logger = silentLogger): Promise<RunningServer> {
  const text = JSON.stringify({
    listen: '127.0.0.1:0',
    upstreams: { g: { command: process.execPath, args: [fixture] } },
    servers: { default: { upstreams: ['g'], namespacing: { mode: 'never' } } },
    store: { memory: {} },
    ...extra,
  })
  return await startServer(parseConfigText(text).config, log)
}

describe('quotas and guards, both eras', () => {
  let enforcing: RunningServer
  let warning: RunningServer
  const warnLines: Json[] = []
  const enforceLines: Json[] = []

  before(async () => {
    enforcing = await start(
      {
        rateLimits: {
          adds: {
            per: ['subject', 'tool'],
            tools: ['add'],
            limit: 2,
            windowMs: 1500,
            algorithm: 'fixed-window',
          },
        },
        guards: {
          arguments: 'enforce',
          output: 'enforce',
          maxResultBytes: 2000,
          oversize: 'truncate',
          redactPatterns: ['internal-[0-9]{4}'],
        },
      },
      recordingLogger(enforceLines),
    )
    warning = await start(
      { guards: { arguments: 'warn', output: 'warn', maxResultTokens: 100, oversize: 'error' } },
      recordingLogger(warnLines),
    )
  })
  after(async () => {
    await enforcing?.stop()
    await warning?.stop()
  })

  for (const [era, open] of Object.entries(ERAS)) {
    describe(era, () => {
      test('a quota is hit, answered with retry-after, and resets', async () => {
        const client = await open(`${enforcing.url}/mcp`)
        try {
          assert.equal(
            (await client.call('add', { a: 1, b: 2 })).result?.content[0]?.text,
            'sum: 1+2',
          )
          await client.call('add', { a: 1, b: 2 })
          const refused = await client.call('add', { a: 1, b: 2 })
          assert.equal(refused.error?.code, -32029, JSON.stringify(refused))
          const details = refused.error?.data?.details as Json
          assert.equal(refused.error?.data?.barbicanCode, 'ERR_RATE_LIMITED')
          assert.equal(details.limit, 'adds')
          assert.ok(
            (details.retryAfterMs as number) > 0 && (details.retryAfterMs as number) <= 1500,
          )
          if (refused.status !== undefined) {
            assert.equal(refused.status, 429)
            assert.equal(refused.retryAfter, String(details.retryAfterSeconds))
          }
          // Other tools are not counted by this limit.
          assert.equal((await client.call('echo', { text: 'hi' })).result?.content[0]?.text, 'hi')
          await new Promise((r) => setTimeout(r, (details.retryAfterMs as number) + 20))
          const again = await client.call('add', { a: 3, b: 4 })
          assert.equal(again.result?.content[0]?.text, 'sum: 3+4', JSON.stringify(again))
        } finally {
          await client.close()
        }
      })

      test('enforce: an invalid argument is refused before the upstream', async () => {
        const client = await open(`${enforcing.url}/mcp`)
        try {
          const refused = await client.call('echo', { text: 42 })
          assert.equal(refused.error?.code, -32602, JSON.stringify(refused))
          assert.equal(refused.error?.data?.barbicanCode, 'ERR_INVALID_PARAMS')
          const details = refused.error?.data?.details as Json
          assert.equal(details.guard, 'arguments')
          assert.match(String(details.errors), /\/text must be string/)
        } finally {
          await client.close()
        }
      })

      test('warn: an invalid argument is forwarded and logged', async () => {
        const client = await open(`${warning.url}/mcp`)
        try {
          const passed = await client.call('echo', { text: 42 })
          assert.equal(passed.result?.content[0]?.text, '42', JSON.stringify(passed))
          assert.ok(warnLines.some((l) => l.guard === 'arguments' && l.tool === 'echo'))
        } finally {
          await client.close()
        }
      })

      test('enforce: structuredContent that breaks the outputSchema is refused', async () => {
        const client = await open(`${enforcing.url}/mcp`)
        try {
          const good = await client.call('weather', {})
          assert.deepEqual(good.result?.structuredContent, { temp: 20 })
          const bad = await client.call('weather', { bad: true })
          assert.equal(bad.error?.code, -32030, JSON.stringify(bad))
          assert.equal(bad.error?.data?.barbicanCode, 'ERR_RESULT_INVALID')
          assert.match(
            String((bad.error?.data?.details as Json | undefined)?.errors),
            /\/temp must be number/,
          )
        } finally {
          await client.close()
        }
      })

      test('an isError result passes unchanged, never validated into another error', async () => {
        const client = await open(`${enforcing.url}/mcp`)
        try {
          const failed = await client.call('fails', {})
          assert.equal(failed.error, undefined)
          assert.equal(failed.result?.isError, true)
          assert.equal(failed.result?.structuredContent, undefined)
          assert.deepEqual(failed.result?.content, [
            { type: 'text', text: 'the upstream failed on purpose' },
          ])
        } finally {
          await client.close()
        }
      })

      test('a result over the byte limit is cut with a note', async () => {
        const client = await open(`${enforcing.url}/mcp`)
        try {
          const big = await client.call('echo', { text: 'x'.repeat(10_000) })
          const content = big.result?.content ?? []
          assert.equal(content.length, 2, JSON.stringify(big).slice(0, 300))
          assert.ok(content[0]!.text.length > 1000 && content[0]!.text.length < 2000)
          assert.match(content[1]!.text, /cut from \d+ bytes/)
          assert.ok(Buffer.byteLength(JSON.stringify(big.result)) < 2200)
        } finally {
          await client.close()
        }
      })

      test('a result over the token limit is refused when oversize is error', async () => {
        const client = await open(`${warning.url}/mcp`)
        try {
          const big = await client.call('echo', { text: 'y'.repeat(1000) })
          assert.equal(big.error?.code, -32031, JSON.stringify(big).slice(0, 300))
          assert.equal((big.error?.data?.details as Json | undefined)?.maxResultTokens, 100)
        } finally {
          await client.close()
        }
      })

      test('secrets in a result are redacted and counted', async () => {
        const client = await open(`${enforcing.url}/mcp`)
        try {
          const before = enforceLines.length
          const text = `key ${AWS_KEY} token ${JWT} ref internal-1234 plain text`
          const out = await client.call('echo', { text })
          assert.equal(
            out.result?.content[0]?.text,
            'key [REDACTED:aws-access-key] token [REDACTED:jwt] ref [REDACTED:custom-1] plain text',
          )
          const line = enforceLines
            .slice(before)
            .find((l) => l.message === 'redacted secrets in a result')
          assert.ok(line, 'no redaction log line')
          assert.equal(line.count, 3)
          assert.deepEqual(line.kinds, { 'aws-access-key': 1, jwt: 1, 'custom-1': 1 })
        } finally {
          await client.close()
        }
      })
    })
  }
})
