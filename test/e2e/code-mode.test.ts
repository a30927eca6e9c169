/**
 * `tools.mode: code` over the official server-filesystem: a client lists one `run_code` tool
 * whose description declares the catalogue, and in one call runs a program that reads three
 * files and writes a summary (both eras: SDK v1 on a 2025-11-25 session, SDK v2 pinned to
 * 2026-07-28). Every call the program makes is a `tools/call` of the caller, permissions and
 * audit included. Then the escapes: reaching the host, an endless loop, a memory bomb and a flood
 * of calls, each stopped within its limit, with the gateway still serving afterwards. Last, a
 * confirmation asked from inside a program: on the legacy session's stream, and for a 2026-07-28
 * client as the `run_code` call's own `input_required` round, the program paused between rounds
 * (ADR 083): accept, decline, one round for calls made together, replay, expiry.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { ephemeralAuditKey } from '../../src/audit/audit-key.ts'
import { AuditLog } from '../../src/audit/audit-log.ts'
import { memoryAuditStore } from '../../src/audit/memory.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { LEGACY_ERA, type ToolClient, toolClientsByEra } from '../support/era-clients.ts'
import { grantTo } from '../support/sandbox.ts'

type Json = Record<string, unknown>

const root = fileURLToPath(new URL('../../', import.meta.url))
const filesystem = join(root, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')
/** Its `add` hides an instruction in its description: the trust scan quarantines it. */
const POISONED = join(root, 'test/fixtures/trust-poisoned-server.ts')

/** The limits the escape tests run into (servers.default.code). */
const LIMITS = { timeoutMs: 3000, memoryMb: 16, maxCalls: 12, maxOutputKb: 8, maxConcurrent: 2 }

interface ToolResult {
  content: { type: string; text?: string }[]
  isError?: boolean
}

const ERAS = toolClientsByEra('code-mode')

/** The multi-step task: three reads and one write, in one program. */
function summaryProgram(dir: string, out: string): string {
  return `
const names = ['alpha.txt', 'beta.txt', 'gamma.txt']
const texts = await Promise.all(
  names.map((name) => files.read_text_file({ path: '${dir}/' + name })),
)
const lines = names.map((name, i) => name + ': ' + texts[i].content.split('\\n')[0])
await files.write_file({ path: '${out}', content: lines.join('\\n') + '\\n' })
console.log('wrote', lines.length, 'lines')
return { summary: '${out}', words: texts.map((t) => t.content.split(/\\s+/).filter(Boolean).length) }
`
}

const text = (r: ToolResult) => r.content.map((c) => c.text ?? '').join('\n')

/** Writes `out` with a destructive tool (so: confirmed first); says whether it was refused. */
const writeProgram = (out: string) => `
  try { await files.write_file({ path: '${out}', content: 'confirmed' }); return 'written' }
  catch (e) { return 'refused: ' + e.message }`

describe('tools.mode: code over server-filesystem', () => {
  let server: RunningServer
  let audit: AuditLog
  let dataDir: string
  const records: Json[] = []
  const alice = generateApiKey()
  const bob = generateApiKey()

  before(async () => {
    dataDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-code-')))
    writeFileSync(join(dataDir, 'alpha.txt'), 'Alpha is first.\nmore alpha\n')
    writeFileSync(join(dataDir, 'beta.txt'), 'Beta is second.\n')
    writeFileSync(join(dataDir, 'gamma.txt'), 'Gamma is third.\nand last\n')
    grantTo('files', dataDir)
    audit = new AuditLog({
      store: memoryAuditStore(),
      key: ephemeralAuditKey(),
      export: { write: (line) => records.push(JSON.parse(line) as Json) },
    })
    const config = {
      listen: '127.0.0.1:0',
      upstreams: { files: { command: process.execPath, args: [filesystem, dataDir] } },
      servers: { default: { tools: { mode: 'code' }, code: LIMITS } },
      auth: {
        apiKeys: {
          keys: [
            { id: 'a', hash: alice.hash, subject: 'alice' },
            { id: 'b', hash: bob.hash, subject: 'bob' },
          ],
        },
        permissions: [
          { subjects: ['alice'], servers: ['*'] },
          { subjects: ['bob'], servers: ['*'], tools: ['read_*', 'list_*'] },
        ],
      },
    }
    server = await startServer(
      parseConfigText(JSON.stringify(config), { json: true }).config,
      silentLogger,
      undefined,
      audit,
    )
  })

  after(async () => {
    await server?.stop()
    await audit?.close()
  })

  for (const [era, connect] of Object.entries(ERAS)) {
    describe(era, () => {
      let client: ToolClient
      before(async () => {
        client = await connect(new URL(`${server.url}/mcp`), alice.key)
      })
      after(async () => {
        await client?.close()
      })

      test('lists one run_code tool that declares the catalogue in TypeScript', async () => {
        const { tools } = await client.listTools()
        assert.deepEqual(
          tools.map((t) => t.name),
          ['run_code'],
        )
        const description = tools[0]?.description ?? ''
        assert.match(description, /declare namespace files \{/)
        assert.match(description, /function read_text_file\(args: \{\n\s+path: string;/)
        assert.match(description, /function write_file\(args: \{/)
      })

      test('reads three files and writes a summary in one call, each step audited', async () => {
        const out = join(dataDir, `summary-${era.split(' ')[0]}.txt`)
        const before = records.length
        const result = (await client.callTool({
          name: 'run_code',
          arguments: { code: summaryProgram(dataDir, out) },
        })) as ToolResult
        assert.notEqual(result.isError, true, text(result))
        assert.equal(result.content[0]?.text, 'wrote 3 lines')
        assert.deepEqual(JSON.parse(String(result.content[1]?.text)), {
          summary: out,
          words: [5, 3, 5],
        })
        assert.equal(
          readFileSync(out, 'utf8'),
          'alpha.txt: Alpha is first.\nbeta.txt: Beta is second.\ngamma.txt: Gamma is third.\n',
        )
        const mine = records
          .slice(before)
          .filter((r) => r.method === 'tools/call' && r.subject === 'alice')
        // The run itself is one record (its program's digest), each call it made another.
        const runs = mine.filter((r) => r.target === 'run_code')
        assert.equal(runs.length, 1)
        assert.equal(runs[0]?.outcome, 'ok')
        assert.equal(typeof runs[0]?.argsDigest, 'string')
        const calls = mine.filter((r) => r.target !== 'run_code')
        assert.deepEqual(calls.map((r) => r.target).sort(), [
          'read_text_file',
          'read_text_file',
          'read_text_file',
          'write_file',
        ])
        for (const r of calls) assert.equal(r.outcome, 'ok')
      })
    })
  }

  describe('escapes, as alice (every tool granted)', () => {
    let client: ToolClient
    const run = async (code: string) =>
      (await client.callTool({ name: 'run_code', arguments: { code } })) as ToolResult
    before(async () => {
      client = await ERAS[LEGACY_ERA]!(new URL(`${server.url}/mcp`), alice.key)
    })
    after(async () => {
      await client?.close()
    })

    test('the host is out of reach: no require, process, fetch, import or bridge', async () => {
      const probe = await run(`
        const seen = {}
        for (const name of ['require', 'process', 'fetch', 'module', 'Deno', 'Bun', 'setTimeout', 'WebAssembly', '__barbicanCall', '__barbicanLog', 'std', 'os'])
          seen[name] = typeof globalThis[name]
        seen.viaFunction = Function('return typeof process')()
        seen.ownGlobals = Object.getOwnPropertyNames(globalThis).filter((n) => /^[a-z_]/.test(n)).sort()
        return seen`)
      assert.notEqual(probe.isError, true, text(probe))
      const seen = JSON.parse(String(probe.content[0]?.text)) as Json
      for (const name of [
        'require',
        'process',
        'fetch',
        'module',
        'Deno',
        'Bun',
        'setTimeout',
        'WebAssembly',
        '__barbicanCall',
        '__barbicanLog',
        'std',
        'os',
      ]) {
        assert.equal(seen[name], 'undefined', `${name} is reachable`)
      }
      assert.equal(seen.viaFunction, 'undefined')
      assert.deepEqual(seen.ownGlobals, [
        'console',
        'decodeURI',
        'decodeURIComponent',
        'encodeURI',
        'encodeURIComponent',
        'escape',
        'eval',
        'files',
        'globalThis',
        'isFinite',
        'isNaN',
        'parseFloat',
        'parseInt',
        'undefined',
        'unescape',
      ])
      for (const code of [`await import('node:fs')`, `return await import('file:///etc/passwd')`]) {
        const refused = await run(code)
        assert.equal(refused.isError, true, code)
        assert.match(text(refused), /ERR_CODE_FAILED: .*could not load module/, code)
      }
    })

    test('an endless loop is stopped at the time limit, even one that catches', async () => {
      for (const code of ['while (true) {}', 'for (;;) { try { while (true) {} } catch {} }']) {
        const started = Date.now()
        const stopped = await run(code)
        const took = Date.now() - started
        assert.equal(stopped.isError, true)
        assert.match(text(stopped), /ERR_CODE_LIMIT: .*time limit of 3000 ms/)
        assert.ok(took < LIMITS.timeoutMs + 2000, `took ${took} ms`)
      }
    })

    test('an endless loop does not stall the gateway for other clients', async () => {
      const other = await ERAS['modern (SDK v2, 2026-07-28)']!(
        new URL(`${server.url}/mcp`),
        alice.key,
      )
      try {
        // Warm: the first calls start the worker threads and the upstream's route.
        await other.callTool({ name: 'run_code', arguments: { code: 'return 0' } })
        await other.callTool({ name: 'list_allowed_directories', arguments: {} })
        const loop = run('while (true) {}')
        loop.catch(() => {})
        // The gateway runs in this process: were the loop on its thread, even this timer would
        // fire only when the loop is stopped, 3 s later.
        const looping = Date.now()
        await new Promise((resolve) => setTimeout(resolve, 300))
        let started = Date.now()
        const direct = (await other.callTool({
          name: 'list_allowed_directories',
          arguments: {},
        })) as ToolResult
        let took = Date.now() - started
        assert.match(text(direct), new RegExp(dataDir.replaceAll('/', '\\/')))
        assert.ok(took < 500, `a direct call waited ${took} ms`)
        assert.ok(Date.now() - looping < 1000, `answered ${Date.now() - looping} ms into the loop`)
        started = Date.now()
        const quick = (await other.callTool({
          name: 'run_code',
          arguments: { code: 'return 1 + 1' },
        })) as ToolResult
        took = Date.now() - started
        assert.equal(text(quick), '2')
        assert.ok(took < 500, `another program waited ${took} ms`)
        assert.ok(Date.now() - looping < 1500, `answered ${Date.now() - looping} ms into the loop`)
        assert.match(text(await loop), /ERR_CODE_LIMIT: .*time limit/)
      } finally {
        await other.close()
      }
    })

    test('a memory bomb is stopped at the memory limit', async () => {
      for (const code of [
        'const a = []; for (;;) a.push(new Array(100000).fill(1))',
        'return new ArrayBuffer(1024 * 1024 * 1024).byteLength',
        "let s = 'x'; const keep = []; for (;;) { s = s + s; keep.push(s) }",
      ]) {
        const stopped = await run(code)
        assert.equal(stopped.isError, true, code)
        assert.match(text(stopped), /ERR_CODE_LIMIT: .*memory limit|string too long/, code)
      }
      const rss = process.memoryUsage().rss
      assert.ok(rss < 1024 * 1024 * 1024, `the gateway holds ${rss} bytes`)
    })

    test('a flood of calls stops at maxCalls; no more reach the upstream', async () => {
      const before = records.length
      const flood = await run(`
        const all = []
        for (let i = 0; i < 1000; i++) all.push(files.list_allowed_directories({}))
        await Promise.all(all)`)
      assert.equal(flood.isError, true)
      assert.match(text(flood), /ERR_CODE_LIMIT: The program made more than 12 tool calls/)
      const calls = records
        .slice(before)
        .filter((r) => r.method === 'tools/call' && r.target !== 'run_code')
      assert.equal(calls.length, LIMITS.maxCalls)
    })

    test('programs beyond maxConcurrent are refused at once, the others run', async () => {
      const program =
        'for (let i = 0; i < 10; i++) await files.list_allowed_directories({}); return 1'
      const results = await Promise.all(Array.from({ length: 6 }, () => run(program)))
      const refused = results.filter((r) => /code\.maxConcurrent/.test(text(r)))
      const done = results.filter((r) => text(r) === '1')
      assert.ok(refused.length >= 1, results.map(text).join(' | '))
      assert.equal(refused.length + done.length, 6, results.map(text).join(' | '))
      for (const r of refused) assert.equal(r.isError, true)
      assert.equal(text(await run(program)), '1', 'the slots are given back')
    })

    test('output beyond maxOutputKb is cut and says so', async () => {
      const long = await run("for (let i = 0; i < 2000; i++) console.log('line', i)")
      assert.notEqual(long.isError, true)
      assert.ok(Buffer.byteLength(text(long)) < LIMITS.maxOutputKb * 1024 + 200)
      assert.match(text(long), /output cut at 8 KiB/)
    })

    test('a program that is not a string is refused as invalid params', async () => {
      await assert.rejects(
        client.callTool({ name: 'run_code', arguments: { code: 42 } as unknown as Json }),
        /code/,
      )
    })

    test('the gateway still runs programs afterwards', async () => {
      const ok = await run('return (await files.list_allowed_directories({})).content')
      assert.notEqual(ok.isError, true, text(ok))
      assert.match(text(ok), new RegExp(dataDir.replaceAll('/', '\\/')))
    })
  })

  test('a program acts as its caller: bob may read, not write, and sees only what he may call', async () => {
    const client = await ERAS[LEGACY_ERA]!(new URL(`${server.url}/mcp`), bob.key)
    try {
      const { tools } = await client.listTools()
      assert.match(tools[0]?.description ?? '', /function read_text_file/)
      assert.doesNotMatch(tools[0]?.description ?? '', /function write_file/)
      const out = join(dataDir, 'bob.txt')
      const result = (await client.callTool({
        name: 'run_code',
        arguments: {
          code: `
            const a = await files.read_text_file({ path: '${dataDir}/alpha.txt' })
            try { await files['write' + '_file']({ path: '${out}', content: a.content }) }
            catch (e) { console.log('refused:', e.message) }
            return { length: a.content.length, names: Object.keys(files) }`,
        },
      })) as ToolResult
      assert.notEqual(result.isError, true, text(result))
      // The hidden tool is not a name the program can enumerate or call.
      assert.match(text(result), /refused: .*not a function/)
      const { names } = JSON.parse(String(result.content[1]?.text)) as { names: string[] }
      assert.ok(names.includes('read_text_file'), names.join(', '))
      assert.ok(names.includes('list_allowed_directories'), names.join(', '))
      assert.ok(!names.includes('write_file'), names.join(', '))
      assert.ok(
        names.every((n) => /^(read|list)_/.test(n)),
        names.join(', '),
      )
      assert.throws(() => readFileSync(out), /ENOENT/)
      // Directly, the same tool is refused by policy, as before.
      await assert.rejects(
        client.callTool({ name: 'write_file', arguments: { path: out, content: 'x' } }),
        /bob may not call the tool "write_file"/,
      )
    } finally {
      await client.close()
    }
  })

  describe('a quarantined tool', () => {
    let trusting: RunningServer
    before(async () => {
      const config = {
        listen: '127.0.0.1:0',
        upstreams: {
          files: { command: process.execPath, args: [filesystem, dataDir] },
          poisoned: { command: process.execPath, args: [POISONED], trust: { scan: 'quarantine' } },
        },
        servers: { default: { tools: { mode: 'code' }, code: LIMITS } },
      }
      trusting = await startServer(
        parseConfigText(JSON.stringify(config), { json: true }).config,
        silentLogger,
      )
    })
    after(async () => {
      await trusting?.stop()
    })

    test('does not exist for a program, and a constructed call fails', async () => {
      const client = new Client({ name: 'code-quarantine', version: '1.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${trusting.url}/mcp`)))
      try {
        const { tools } = await client.listTools()
        assert.doesNotMatch(tools[0]?.description ?? '', /function add\(/)
        const result = (await client.callTool({
          name: 'run_code',
          arguments: {
            code: `
              const globals = Object.getOwnPropertyNames(globalThis)
              const adds = globals.filter((g) => globalThis[g] && typeof globalThis[g].add === 'function')
              let called
              try { await globalThis['poi' + 'soned']['a' + 'dd']({ a: 1, b: 2 }); called = 'ran' }
              catch (e) { called = e.name }
              return { adds, called, files: typeof files }`,
          },
        })) as ToolResult
        assert.notEqual(result.isError, true, text(result))
        assert.deepEqual(JSON.parse(String(result.content[0]?.text)), {
          adds: [],
          called: 'TypeError',
          files: 'object',
        })
        // A direct call is refused as quarantined (no upstream reached either way).
        await assert.rejects(
          client.callTool({ name: 'poisoned__add', arguments: { a: 1, b: 2 } }),
          /quarantined/,
        )
      } finally {
        await client.close()
      }
    })
  })

  describe('confirmation of a destructive tool called from a program', () => {
    let confirming: RunningServer
    before(async () => {
      const config = {
        listen: '127.0.0.1:0',
        upstreams: { files: { command: process.execPath, args: [filesystem, dataDir] } },
        servers: { default: { tools: { mode: 'code' }, code: LIMITS } },
        confirm: { destructive: true },
      }
      confirming = await startServer(
        parseConfigText(JSON.stringify(config), { json: true }).config,
        silentLogger,
      )
    })
    after(async () => {
      await confirming?.stop()
    })

    for (const answer of ['accept', 'decline'] as const) {
      test(`legacy: the human is asked on the run_code request and ${answer}s`, async () => {
        const asked: string[] = []
        const client = new Client(
          { name: 'code-confirm', version: '1.0.0' },
          { capabilities: { elicitation: {} } },
        )
        client.setRequestHandler(ElicitRequestSchema, async (request) => {
          asked.push(String(request.params.message))
          return answer === 'accept' ? { action: 'accept', content: {} } : { action: answer }
        })
        await client.connect(new StreamableHTTPClientTransport(new URL(`${confirming.url}/mcp`)))
        try {
          const out = join(dataDir, `confirm-${answer}.txt`)
          const result = (await client.callTool({
            name: 'run_code',
            arguments: { code: writeProgram(out) },
          })) as ToolResult
          assert.equal(asked.length, 1)
          assert.match(asked[0]!, /write_file/)
          if (answer === 'accept') {
            assert.equal(text(result), '"written"')
            assert.equal(readFileSync(out, 'utf8'), 'confirmed')
          } else {
            assert.match(text(result), /refused: write_file: error/)
            assert.throws(() => readFileSync(out), /ENOENT/)
          }
        } finally {
          await client.close()
        }
      })
    }
  })

  describe('a 2026-07-28 client answers the confirmation a program asks (held run_code)', () => {
    /** Shorter than the human below takes: the clock must stand still while they decide. */
    const TIME_LIMIT_MS = 1500
    /** A human slower than the limit and the watchdog's grace after it (code-thread.ts). */
    const HUMAN_MS = TIME_LIMIT_MS + 1500
    /** How long a paused program waits for the answer (limits.heldCallTimeoutMs). */
    const ANSWER_MS = 4000
    let held: RunningServer
    before(async () => {
      const config = {
        listen: '127.0.0.1:0',
        upstreams: { files: { command: process.execPath, args: [filesystem, dataDir] } },
        servers: {
          default: {
            tools: { mode: 'code' },
            code: { ...LIMITS, timeoutMs: TIME_LIMIT_MS, maxConcurrent: 1 },
          },
        },
        confirm: { destructive: true },
        limits: { heldCallTimeoutMs: ANSWER_MS },
      }
      held = await startServer(
        parseConfigText(JSON.stringify(config), { json: true }).config,
        silentLogger,
      )
    })
    after(async () => {
      await held?.stop()
    })

    /** An SDK v2 client pinned to 2026-07-28 that declares elicitation; `answer` handles it. */
    async function modernClient(
      answer?: (message: string) => Promise<{ action: 'accept' | 'decline' | 'cancel' }>,
    ): Promise<ClientV2> {
      const client = new ClientV2(
        { name: 'code-confirm', version: '1.0.0' },
        { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: {} } },
      )
      if (answer) {
        client.setRequestHandler('elicitation/create', async (request) => {
          const { action } = await answer(String(request.params.message))
          return action === 'accept' ? { action, content: {} } : { action }
        })
      }
      await client.connect(new StreamableHTTPClientTransportV2(new URL(`${held.url}/mcp`)))
      assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28')
      return client
    }

    /** run_code with `code`, its input_required round handed back rather than answered. */
    const manualRun = (client: ClientV2, code: string, retry: Json = {}) =>
      client.callTool({ name: 'run_code', arguments: { code }, ...retry }, {
        allowInputRequired: true,
      } as never) as unknown as Promise<Json>

    for (const answer of ['accept', 'decline'] as const) {
      test(`the question is the run_code call's round; ${answer} resumes the paused program`, async () => {
        const asked: string[] = []
        const client = await modernClient(async (message) => {
          asked.push(message)
          // The human takes longer than the program's whole time limit.
          await new Promise((resolve) => setTimeout(resolve, HUMAN_MS))
          return { action: answer }
        })
        try {
          const out = join(dataDir, `held-${answer}.txt`)
          const result = (await client.callTool({
            name: 'run_code',
            arguments: {
              code: `const before = await files.list_allowed_directories({})
${writeProgram(out)}`,
            },
          })) as ToolResult
          assert.equal(asked.length, 1)
          assert.match(asked[0]!, /"write_file"/)
          assert.match(asked[0]!, new RegExp(out.replaceAll('/', '\\/')))
          if (answer === 'accept') {
            assert.equal(text(result), '"written"')
            assert.equal(readFileSync(out, 'utf8'), 'confirmed')
          } else {
            // Declined: the call fails inside the program as a direct call would be refused.
            assert.match(text(result), /"refused: write_file: error -32\d+: The user declined/)
            assert.throws(() => readFileSync(out), /ENOENT/)
          }
        } finally {
          await client.close()
        }
      })
    }

    test('legacy too: the time limit stands still while the human decides', async () => {
      const client = new Client(
        { name: 'code-confirm', version: '1.0.0' },
        { capabilities: { elicitation: {} } },
      )
      client.setRequestHandler(ElicitRequestSchema, async () => {
        await new Promise((resolve) => setTimeout(resolve, HUMAN_MS))
        return { action: 'accept', content: {} }
      })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${held.url}/mcp`)))
      try {
        const out = join(dataDir, 'held-legacy.txt')
        const result = (await client.callTool({
          name: 'run_code',
          arguments: { code: writeProgram(out) },
        })) as ToolResult
        assert.equal(text(result), '"written"')
        assert.equal(readFileSync(out, 'utf8'), 'confirmed')
      } finally {
        await client.close()
      }
    })

    test('calls made together ask in one round, and each answer reaches its own call', async () => {
      const client = await modernClient()
      try {
        const [yes, no] = [join(dataDir, 'held-yes.txt'), join(dataDir, 'held-no.txt')]
        const code = `
          const write = (path) => files.write_file({ path, content: 'confirmed' }).then(() => 'written', (e) => 'refused')
          return await Promise.all([write('${yes}'), write('${no}')])`
        const round = await manualRun(client, code)
        const questions = Object.entries(round.inputRequests as Record<string, Json>)
        assert.equal(questions.length, 2, JSON.stringify(round))
        const answers: Json = {}
        for (const [key, question] of questions) {
          const message = String((question.params as Json).message)
          answers[key] = message.includes(yes)
            ? { action: 'accept', content: {} }
            : { action: 'decline' }
        }
        const done = (await manualRun(client, code, {
          requestState: round.requestState,
          inputResponses: answers,
        })) as unknown as ToolResult
        assert.equal(text(done), '["written","refused"]')
        assert.equal(readFileSync(yes, 'utf8'), 'confirmed')
        assert.throws(() => readFileSync(no), /ENOENT/)
      } finally {
        await client.close()
      }
    })

    test('an answer is used once: replaying the accepted round is refused', async () => {
      const client = await modernClient()
      try {
        const out = join(dataDir, 'held-replay.txt')
        const code = writeProgram(out)
        const round = await manualRun(client, code)
        assert.equal(round.resultType, 'input_required', JSON.stringify(round))
        const [key, question] = Object.entries(round.inputRequests as Record<string, Json>)[0]!
        assert.equal(question.method, 'elicitation/create')
        const answered = {
          requestState: round.requestState,
          inputResponses: { [key]: { action: 'accept', content: {} } },
        }
        const done = (await manualRun(client, code, answered)) as unknown as ToolResult
        assert.equal(text(done), '"written"')
        rmSync(out)
        await assert.rejects(manualRun(client, code, answered), /no longer held/)
        assert.throws(() => readFileSync(out), /ENOENT/, 'the replay wrote nothing')
        // Nor does the state answer another program.
        const other = await manualRun(client, `${code}\n// another`, answered).catch(
          (e: Error) => e,
        )
        assert.ok(other instanceof Error, 'a state bound to another request is refused')
      } finally {
        await client.close()
      }
    })

    test('an abandoned round expires: the program is aborted and its worker freed', async () => {
      const client = await modernClient()
      try {
        const out = join(dataDir, 'held-abandoned.txt')
        const code = writeProgram(out)
        const round = await manualRun(client, code)
        assert.equal(round.resultType, 'input_required')
        // The paused program still holds its place (code.maxConcurrent is 1 here).
        const busy = (await client.callTool({
          name: 'run_code',
          arguments: { code: 'return 1' },
        })) as ToolResult
        assert.match(text(busy), /code\.maxConcurrent/)
        await new Promise((resolve) => setTimeout(resolve, ANSWER_MS + 500))
        const [key] = Object.keys(round.inputRequests as Json)
        const late = {
          requestState: round.requestState,
          inputResponses: { [key!]: { action: 'accept', content: {} } },
        }
        await assert.rejects(manualRun(client, code, late), /no longer held|expired/)
        assert.throws(() => readFileSync(out), /ENOENT/)
        // Its place and worker are free again.
        const next = (await client.callTool({
          name: 'run_code',
          arguments: { code: 'return 2' },
        })) as ToolResult
        assert.equal(text(next), '2')
      } finally {
        await client.close()
      }
    })
  })
})
