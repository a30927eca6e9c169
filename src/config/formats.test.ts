// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} placeholders
import assert from 'node:assert/strict'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { RemoteUpstreamConfig, StdioUpstreamConfig, UpstreamConfig } from './config.ts'
import { ConfigError, formatKeyPath } from './config-error.ts'
import { detectFormat } from './formats.ts'
import { loadConfig, parseConfigText } from './load.ts'

const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), 'barbican-formats-'))
after(() => rmSync(scratch, { recursive: true, force: true }))

function byName(upstreams: readonly UpstreamConfig[]): Record<string, UpstreamConfig> {
  return Object.fromEntries(upstreams.map((u) => [u.name, u]))
}

function problems(run: () => unknown): string[] {
  try {
    run()
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err))
    return err.issues.map((i) => `${formatKeyPath(i.path)}: ${i.message}`)
  }
  assert.fail('expected a ConfigError')
}

describe('Claude Desktop, Cursor and Windsurf files (mcpServers)', () => {
  test('loads a real-looking Claude Desktop config unchanged', async () => {
    const loaded = await loadConfig({ path: join(fixtures, 'claude-desktop.json'), env: {} })
    assert.ok(loaded)
    assert.equal(loaded.source.format, 'claude')
    const upstreams = byName(loaded.config.upstreams)
    assert.deepEqual(Object.keys(upstreams), ['filesystem', 'github', 'brave-search', 'sqlite'])
    const { sandbox, ...filesystem } = upstreams.filesystem as StdioUpstreamConfig
    assert.notEqual(sandbox, 'none', 'confined by default')
    assert.deepEqual(filesystem, {
      name: 'filesystem',
      transport: 'stdio',
      command: 'npx',
      args: [
        '-y',
        '@modelcontextprotocol/server-filesystem',
        '/Users/alice/Desktop',
        '/Users/alice/Downloads',
      ],
      env: {},
      lazy: false,
      idleTimeoutMs: 0,
      requestTimeoutMs: 60000,
    })
    assert.deepEqual((upstreams.github as StdioUpstreamConfig).env, {
      GITHUB_PERSONAL_ACCESS_TOKEN: 'github_pat_11AAAAAAA0000000000000',
    })
    assert.deepEqual(loaded.warnings, [
      'ignored top-level keys not about MCP servers: globalShortcut, preferences',
    ])
    // Several upstreams on one endpoint: names are namespaced by default.
    assert.deepEqual(
      loaded.config.servers.map((s) => [s.path, s.namespacing.mode]),
      [['/mcp', 'always']],
    )
  })

  test('maps Cursor url entries and their type to remote transports', async () => {
    const loaded = await loadConfig({
      path: join(fixtures, 'cursor.json'),
      env: { LINEAR_TOKEN: 'lin_1' },
    })
    assert.ok(loaded)
    const upstreams = byName(loaded.config.upstreams)
    const remote = (name: string) => upstreams[name] as RemoteUpstreamConfig
    assert.deepEqual(remote('linear'), {
      name: 'linear',
      transport: 'auto',
      url: 'https://mcp.linear.app/mcp',
      headers: { Authorization: 'Bearer lin_1' },
      requestTimeoutMs: 60000,
    })
    assert.equal(remote('legacy-events').transport, 'sse')
    assert.equal(remote('realtime').transport, 'websocket')
    assert.equal(remote('docs').transport, 'streamable-http')
    assert.equal(upstreams.puppeteer?.transport, 'stdio')
    assert.equal(upstreams['old-thing'], undefined)
    assert.deepEqual(loaded.warnings, [
      'mcpServers.puppeteer: ignored autoApprove',
      'mcpServers.old-thing is disabled and was skipped',
    ])
  })

  test('maps type "http" to Streamable HTTP and reads Windsurf serverUrl entries', () => {
    const http = parseConfigText(
      '{"mcpServers": {"a": {"type": "http", "url": "https://a.example/mcp"}}}',
      {
        json: true,
      },
    )
    assert.equal(http.config.upstreams[0]?.transport, 'streamable-http')
    const loaded = parseConfigText(
      JSON.stringify({
        mcpServers: {
          'remote-tools': {
            serverUrl: 'https://tools.example.com/mcp',
            headers: { 'X-Api-Key': '${env:TOOLS_KEY}' },
          },
          'My Notes (local)': { command: 'node', args: ['${userHome}/notes/index.js'] },
        },
      }),
      { json: true, env: { TOOLS_KEY: 'tk' } },
    )
    const upstreams = byName(loaded.config.upstreams)
    assert.equal(
      (upstreams['remote-tools'] as RemoteUpstreamConfig).url,
      'https://tools.example.com/mcp',
    )
    assert.deepEqual((upstreams['remote-tools'] as RemoteUpstreamConfig).headers, {
      'X-Api-Key': 'tk',
    })
    // A name with spaces cannot prefix tool names; it is served under a safe name, with a note.
    assert.deepEqual((upstreams['My-Notes-local'] as StdioUpstreamConfig).args, [
      `${homedir()}/notes/index.js`,
    ])
    assert.deepEqual(loaded.warnings, [
      'mcpServers["My Notes (local)"] is served as upstream "My-Notes-local"',
    ])
  })

  test('loads the Windsurf fixture from disk', async () => {
    const loaded = await loadConfig({
      path: join(fixtures, 'windsurf.json'),
      env: { TOOLS_KEY: 'x' },
    })
    assert.equal(loaded?.config.upstreams.length, 2)
  })

  test('names problems by the keys of the file, not by native keys', () => {
    const lines = problems(() =>
      parseConfigText(
        JSON.stringify({
          mcpServers: {
            files: { command: 'npx', args: ['-y', { bad: 1 }] },
            web: { type: 'carrier-pigeon', url: 'https://w.example' },
            ws: { type: 'ws', url: 'https://w.example' },
            neither: { args: [] },
          },
        }),
        { json: true },
      ),
    )
    assert.deepEqual(lines.sort(), [
      'mcpServers.files.args[1]: expected a string, number or boolean, got a mapping',
      'mcpServers.neither: expected a mapping with "command", "url" or "wasm"',
      'mcpServers.web.type: expected one of "stdio", "http", "streamable-http", "streamableHttp", "sse", "ws", "websocket"',
      'mcpServers.ws.type: is "websocket" but the url is http(s)://; use a ws:// or wss:// url',
    ])
  })

  test('refuses a file that mixes mcpServers with native keys', () => {
    const lines = problems(() =>
      parseConfigText('{"mcpServers": {}, "upstreams": {"a": {"command": "a"}}}', { json: true }),
    )
    assert.equal(lines.length, 1)
    assert.match(
      lines[0] ?? '',
      /^mcpServers: cannot be combined with Barbican's own keys \(upstreams\)/,
    )
  })
})

describe('VS Code mcp.json', () => {
  test('loads .vscode/mcp.json with comments, unused inputs and ${workspaceFolder}', async () => {
    const project = join(scratch, 'project')
    mkdirSync(join(project, '.vscode'), { recursive: true })
    copyFileSync(join(fixtures, 'vscode-mcp.jsonc'), join(project, '.vscode', 'mcp.json'))
    const loaded = await loadConfig({
      path: '.vscode/mcp.json',
      cwd: project,
      env: { GITHUB_TOKEN: 'gh' },
    })
    assert.ok(loaded)
    assert.equal(loaded.source.format, 'vscode')
    assert.deepEqual(loaded.warnings, [])
    const upstreams = byName(loaded.config.upstreams)
    assert.deepEqual((upstreams.memory as StdioUpstreamConfig).env, {
      MEMORY_FILE_PATH: join(project, 'memory.jsonl'),
    })
    // VS Code's "http" tries Streamable HTTP and falls back to SSE: that is auto.
    assert.equal(upstreams.github?.transport, 'auto')
    assert.deepEqual((upstreams.github as RemoteUpstreamConfig).headers, {
      Authorization: 'Bearer gh',
    })
    assert.equal(upstreams.events?.transport, 'sse')
    assert.deepEqual(
      loaded.config.servers.map((s) => s.name),
      ['default'],
    )
  })

  test('refuses ${input:...} placeholders, naming the key that uses one', async () => {
    const err = await loadConfig({ path: join(fixtures, 'vscode-input.json'), env: {} }).catch(
      (e) => e,
    )
    assert.ok(err instanceof ConfigError)
    assert.equal(err.code, 'ERR_CONFIG_INVALID')
    assert.deepEqual(
      err.issues.map((i) => formatKeyPath(i.path)),
      ['servers.perplexity.env.PERPLEXITY_API_KEY'],
    )
    assert.match(err.message, /\$\{input:perplexity-key\}, a VS Code input prompt/)
  })

  test('reads envFile, with env entries taking precedence', () => {
    const dir = join(scratch, 'envfile')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, '.env'), '# secrets\nexport A=1\nB="two words"\nC=3 # note\n')
    const loaded = parseConfigText(
      JSON.stringify({
        servers: {
          s: { type: 'stdio', command: 'x', envFile: '${workspaceFolder}/.env', env: { C: 'env' } },
        },
      }),
      { file: join(dir, 'mcp.json') },
    )
    assert.deepEqual((loaded.config.upstreams[0] as StdioUpstreamConfig).env, {
      A: '1',
      B: 'two words',
      C: 'env',
    })
  })

  test('tells VS Code server entries from native virtual servers by their shape', () => {
    assert.deepEqual(detectFormat({ servers: { a: { type: 'stdio', command: 'x' } } }), {
      format: 'vscode',
    })
    assert.deepEqual(detectFormat({ servers: { a: { url: 'https://x' } } }), { format: 'vscode' })
    assert.deepEqual(detectFormat({ servers: { a: { upstreams: ['x'] } } }), { format: 'native' })
    assert.deepEqual(detectFormat({ upstreams: {}, servers: { a: { command: 'x' } } }), {
      format: 'native',
    })
    assert.deepEqual(detectFormat({ inputs: [], servers: {} }), { format: 'vscode' })
    assert.deepEqual(detectFormat({ mcpServers: {}, other: 1 }), { format: 'claude' })
    const mixed = detectFormat({ servers: { a: { command: 'x' }, b: { upstreams: ['a'] } } })
    assert.ok('issue' in mixed)
    assert.match(
      mixed.issue.message,
      /mixes VS Code server entries \("a"[^)]*\) with entries that are not \("b"\)/,
    )
  })

  test('reports native virtual servers without upstreams as a native file', () => {
    const lines = problems(() => parseConfigText('servers:\n  files: { upstreams: [fs] }\n'))
    assert.deepEqual(lines, ['upstreams: is required: name at least one upstream MCP server'])
  })
})
