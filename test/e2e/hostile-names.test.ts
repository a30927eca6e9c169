/**
 * Hostile tool and prompt names never reach clients: an upstream advertising names with ANSI
 * escape sequences, a newline, NUL, 200 characters, an empty name and a lookalike letter, behind
 * Barbican, seen by the official SDK client over Streamable HTTP. Only names obeying MCP's
 * tool-name rules (1–128 of A–Z a–z 0–9 _ - .) are exposed, after namespacing too; the rest are
 * held back, logged and reported by `barbican scan` with the reason, escaped.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { main } from '../../src/cli/main.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { jsonLogger } from '../../src/telemetry/log.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const fixture = join(root, 'test/fixtures/trust-hostile-names-server.ts')
const memory = join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')
const dir = mkdtempSync(join(tmpdir(), 'barbican-names-'))

const configText = JSON.stringify({
  listen: '127.0.0.1:0',
  upstreams: {
    // 120 characters is a valid name, and 129 once namespaced as hostile__….
    hostile: { command: process.execPath, args: [fixture], env: { HOSTILE_LONG_VALID: '120' } },
    memory: {
      command: process.execPath,
      args: [memory],
      env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
    },
  },
  servers: {
    alone: { upstreams: ['hostile'] },
    both: { upstreams: ['hostile', 'memory'] },
    renamed: { upstreams: ['hostile'], tools: { rename: { 'two\nlines': 'two_lines' } } },
  },
})

/** Any C0 control or DEL: what must never reach a client or an operator's terminal. */
const hasControl = (text: string) => [...text].some((c) => c < ' ' || c === '\u007f')

describe('hostile tool and prompt names', () => {
  let server: RunningServer
  const logLines: string[] = []
  const clients: Client[] = []

  async function connect(name: string): Promise<Client> {
    const client = new Client({ name: 'names', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp/${name}`)))
    clients.push(client)
    return client
  }

  before(async () => {
    const { config } = parseConfigText(configText, { cwd: root })
    server = await startServer(
      config,
      jsonLogger({ level: 'warn', write: (line) => void logLines.push(line) }),
    )
  })

  after(async () => {
    for (const c of clients) await c.close()
    await server?.stop()
  })

  test('only names within the MCP name rules are listed', async () => {
    const client = await connect('alone')
    const { tools } = await client.listTools()
    assert.deepEqual(
      tools.map((t) => t.name),
      ['honest', 'v'.repeat(120)],
    )
    const { prompts } = await client.listPrompts()
    assert.deepEqual(
      prompts.map((p) => p.name),
      ['honest', 'v'.repeat(120)],
    )
  })

  test('a held-back name cannot be called or fetched', async () => {
    const client = await connect('alone')
    await assert.rejects(
      client.callTool({ name: 'red\u001b[31mtext', arguments: {} }),
      /Unknown tool|unknown/i,
    )
    await assert.rejects(client.getPrompt({ name: 'two\nlines' }), /Unknown prompt|unknown/i)
    const ok = await client.callTool({ name: 'honest', arguments: {} })
    assert.deepEqual(ok.content, [{ type: 'text', text: 'called "honest"' }])
  })

  test('a valid name that outgrows 128 characters once namespaced is held back too', async () => {
    const client = await connect('both')
    const { tools } = await client.listTools()
    const names = tools.map((t) => t.name)
    assert.ok(names.includes('hostile__honest'), names.join(' '))
    assert.ok(names.includes('memory__create_entities'))
    for (const name of names) assert.ok(/^[A-Za-z0-9_.-]{1,128}$/.test(name), name)
    assert.ok(!names.some((n) => n.startsWith('hostile__vvv')))
    const line = logLines.find(
      (l) =>
        l.includes('name held back from clients') &&
        l.includes('"server":"both"') &&
        l.includes('vvvv'),
    )
    assert.match(line ?? '', /"reason":"the exposed name is 129 characters long, over 128"/)
  })

  test('the operator can expose one under a valid name with rename', async () => {
    const client = await connect('renamed')
    const { tools } = await client.listTools()
    assert.ok(tools.some((t) => t.name === 'two_lines'))
    const called = await client.callTool({ name: 'two_lines', arguments: {} })
    assert.deepEqual(called.content, [{ type: 'text', text: 'called "two\\nlines"' }])
  })

  test('each held-back name is logged with the reason, escaped', () => {
    const held = logLines.filter(
      (l) => l.includes('name held back from clients') && l.includes('"server":"alone"'),
    )
    const reasons = held.map((l) => JSON.parse(l) as Record<string, string>)
    const byName = new Map(reasons.filter((r) => r.kind === 'tool').map((r) => [r.name, r.reason]))
    assert.equal(
      byName.get('clear\\u{1b}[2J\\u{1b}[Hscreen'),
      'the name contains a control or invisible character (U+001B)',
    )
    assert.equal(
      byName.get('two\\u{a}lines'),
      'the name contains a control or invisible character (U+000A)',
    )
    assert.equal(
      byName.get('nul\\u{0}byte'),
      'the name contains a control or invisible character (U+0000)',
    )
    assert.equal(
      byName.get(`${'x'.repeat(80)}… (200 characters)`),
      'the name is 200 characters long, over 128',
    )
    assert.equal(byName.get(''), 'the name is empty')
    assert.equal(
      byName.get('read_fil\u0435'),
      'the name contains U+0435, outside A-Z a-z 0-9 _ - .',
    )
    assert.equal(byName.get('has space'), 'the name contains U+0020, outside A-Z a-z 0-9 _ - .')
    for (const r of reasons) assert.ok(!hasControl(r.name!), JSON.stringify(r.name))
  })

  test('barbican scan reports every hostile name, escaped for the terminal', async () => {
    const file = join(dir, 'barbican.json')
    writeFileSync(
      file,
      JSON.stringify({ upstreams: { hostile: { command: process.execPath, args: [fixture] } } }),
    )
    let stdout = ''
    const code = await main(['scan', '--config', file], {
      stdout: (t) => {
        stdout += t
      },
      stderr: () => {},
    })
    assert.equal(code, 1, stdout)
    assert.ok(!stdout.split('\n').some(hasControl), 'no raw escape or NUL reaches the terminal')
    const held = (name: string, severity: string, reason: string) =>
      `${severity.padEnd(8)} hostile tool:${name} invalid-name: ${reason}; held back from clients (rename it in the virtual server to expose it) [name]`
    for (const line of [
      held(
        'red\\u{1b}[31mtext',
        'high',
        'the name contains a control or invisible character (U+001B)',
      ),
      held('two\\u{a}lines', 'high', 'the name contains a control or invisible character (U+000A)'),
      held('nul\\u{0}byte', 'high', 'the name contains a control or invisible character (U+0000)'),
      held(
        `${'x'.repeat(80)}… (200 characters)`,
        'medium',
        'the name is 200 characters long, over 128',
      ),
      held('', 'medium', 'the name is empty'),
      held('read_fil\u0435', 'medium', 'the name contains U+0435, outside A-Z a-z 0-9 _ - .'),
    ])
      assert.ok(stdout.includes(line), `missing: ${line}\n${stdout}`)

    let checked = ''
    await main(['check', '--config', file], {
      stdout: (t) => {
        checked += t
      },
      stderr: () => {},
    })
    assert.ok(!checked.split('\n').some(hasControl), 'no raw escape or NUL reaches the terminal')
    assert.ok(
      checked.includes(
        'held back: the name contains a control or invisible character (U+001B)\n',
      ) && checked.includes('tool "red\\u{1b}[31mtext" of hostile held back'),
      checked,
    )
  })
})
