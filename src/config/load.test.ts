// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} placeholders
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { StdioUpstreamConfig } from './config.ts'
import { ConfigError, formatKeyPath } from './config-error.ts'
import { loadConfig, parseConfigText } from './load.ts'

const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), 'barbican-config-'))
after(() => rmSync(scratch, { recursive: true, force: true }))

let dirs = 0
function dirWith(files: Record<string, string>): string {
  const dir = join(scratch, `d${dirs++}`)
  mkdirSync(dir, { recursive: true })
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  return dir
}

async function failure(promise: Promise<unknown> | (() => unknown)): Promise<ConfigError> {
  try {
    await (typeof promise === 'function' ? promise() : promise)
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err))
    assert.equal(err.code, 'ERR_CONFIG_INVALID')
    return err
  }
  assert.fail('expected a ConfigError')
}

const fixtureEnv = { API_KEY: 'k-123' }

describe('loadConfig with native files', () => {
  test('loads the native YAML fixture with interpolation and every value in place', async () => {
    const loaded = await loadConfig({ path: join(fixtures, 'native.yaml'), env: fixtureEnv })
    assert.ok(loaded)
    assert.deepEqual(loaded.source, { path: join(fixtures, 'native.yaml'), format: 'native' })
    assert.deepEqual(loaded.warnings, [])
    const { config } = loaded
    assert.deepEqual(config.listen, { host: '127.0.0.1', port: 7411 })
    assert.equal(config.log.level, 'debug')
    assert.equal(config.limits.maxMessageBytes, 1048576)
    assert.deepEqual(config.security.allowedOrigins.slice(-1), ['https://app.example.com'])
    const [confined, remote] = config.upstreams
    const { sandbox, ...everything } = confined as StdioUpstreamConfig
    // Confined by default: a state folder beside the config, the config itself masked inside.
    assert.ok(sandbox !== 'none')
    assert.equal(sandbox.stateDir, join(fixtures, '.barbican/state/everything'))
    assert.ok(sandbox.protect.includes(join(fixtures, 'native.yaml')))
    assert.ok(sandbox.protect.includes(join(fixtures, 'barbican.lock')))
    assert.deepEqual(everything, {
      name: 'everything',
      transport: 'stdio',
      command: 'node',
      args: ['server.js', 'stdio'],
      env: { API_KEY: 'k-123', PORT: '3000' },
      lazy: true,
      idleTimeoutMs: 0,
      requestTimeoutMs: 30000,
    })
    assert.deepEqual(remote, {
      name: 'remote',
      transport: 'streamable-http',
      url: 'https://mcp.example.com/mcp',
      headers: { Authorization: 'Bearer anonymous' },
      requestTimeoutMs: 5000,
    })
    const files = config.servers.find((s) => s.name === 'files')
    assert.deepEqual(files?.namespacing, { mode: 'on-conflict', separator: '.' })
    assert.deepEqual(files?.tools.rename, { echo: 'say' })
    assert.deepEqual(files?.resources.include, ['file:///data/**'])
    assert.equal(files?.path, '/mcp/files')
  })

  test('reads the JSON twin of the YAML fixture into the same config', async () => {
    const yaml = await loadConfig({ path: 'native.yaml', cwd: fixtures, env: fixtureEnv })
    const json = await loadConfig({ path: 'native.json', cwd: fixtures, env: fixtureEnv })
    // Identical but for which config file each sandbox masks.
    const masked = (loaded: typeof yaml) =>
      JSON.stringify(loaded?.config).replaceAll(/native\.(yaml|json)/g, 'native.*')
    assert.equal(masked(json), masked(yaml))
  })

  test('looks for barbican.yaml, then barbican.yml, then barbican.json', async () => {
    const body = (port: number) =>
      `{"listen": "127.0.0.1:${port}", "upstreams": {"a": {"command": "a"}}}`
    const all = dirWith({
      'barbican.json': body(3),
      'barbican.yml': body(2),
      'barbican.yaml': body(1),
    })
    assert.equal((await loadConfig({ cwd: all }))?.config.listen.port, 1)
    const two = dirWith({ 'barbican.json': body(3), 'barbican.yml': body(2) })
    assert.equal((await loadConfig({ cwd: two }))?.config.listen.port, 2)
    const json = dirWith({ 'barbican.json': body(3) })
    const loaded = await loadConfig({ cwd: json })
    assert.equal(loaded?.config.listen.port, 3)
    assert.equal(loaded?.source.path, join(json, 'barbican.json'))
  })

  test('resolves to undefined when no path is given and no default file exists', async () => {
    assert.equal(await loadConfig({ cwd: dirWith({ 'other.yaml': 'x: 1' }) }), undefined)
  })

  test('fails for an explicit path that does not exist, naming the file', async () => {
    const err = await failure(loadConfig({ path: 'missing.yaml', cwd: scratch }))
    assert.equal(err.file, join(scratch, 'missing.yaml'))
    assert.match(err.message, /missing\.yaml.*\n.*does not exist/)
  })

  test('reports a YAML syntax error with its line', async () => {
    const dir = dirWith({ 'barbican.yaml': 'upstreams:\n  a: { command: x\n' })
    const err = await failure(loadConfig({ cwd: dir }))
    assert.equal(err.issues.length, 1)
    assert.match(err.issues[0]?.message ?? '', /^YAML syntax error/)
    assert.equal(typeof err.issues[0]?.line, 'number')
  })

  test('rejects duplicate keys, which would otherwise silently override', async () => {
    const dir = dirWith({
      'barbican.json': '{"upstreams": {"a": {"command": "x"}, "a": {"command": "y"}}}',
    })
    const err = await failure(loadConfig({ cwd: dir }))
    assert.match(err.issues[0]?.message ?? '', /JSON syntax error: Map keys must be unique/)
  })

  test('points each validation problem at its key path and line, in file order', async () => {
    const text = [
      'listen: 127.0.0.1:7300',
      'upstreams:',
      '  files:',
      '    command: node',
      '    args:',
      '      - ok',
      '      - { nested: true }',
      '  web: { url: "not a url" }',
      'log: { level: loud }',
      '',
    ].join('\n')
    const err = await failure(() => parseConfigText(text, { file: '/etc/barbican.yaml' }))
    assert.deepEqual(
      err.issues.map((i) => [formatKeyPath(i.path), i.line]),
      [
        ['upstreams.files.args[1]', 7],
        ['upstreams.web.url', 8],
        ['log.level', 9],
      ],
    )
    assert.match(err.message, /^Invalid configuration in \/etc\/barbican\.yaml: 3 problems\n/)
    assert.match(err.message, /upstreams\.files\.args\[1\] \(line 7, column 9\): expected a string/)
  })

  test('with strict, names the key path and the variable when an environment variable is missing', async () => {
    const err = await failure(
      loadConfig({ path: join(fixtures, 'native.yaml'), env: {}, strict: true }),
    )
    assert.deepEqual(
      err.issues.map((i) => `${formatKeyPath(i.path)}: ${i.message}`),
      [
        'upstreams.everything.env.API_KEY: needs environment variable API_KEY, which is not set (set it, or write ${API_KEY:-default})',
      ],
    )
    assert.equal(err.issues[0]?.line, 13)
  })

  test('reads JSON with comments and trailing commas', () => {
    const text =
      '{\n  // a comment\n  "upstreams": { "a": { "command": "x", /* inline */ }, },\n}\n'
    const loaded = parseConfigText(text, { file: '/x/barbican.json' })
    assert.equal(loaded.config.upstreams[0]?.name, 'a')
    assert.equal(
      parseConfigText('{"upstreams": {"a": {"url": "http://h//p"}}}', { json: true }).config
        .upstreams[0]?.name,
      'a',
    )
  })

  test('reads the log section: levels per component, format and redacted paths', async () => {
    const text = [
      'upstreams: { a: { command: x } }',
      'log: { levels: { call: warn, upstream: debug }, format: json, redact: [env.*] }',
    ].join('\n')
    const { config } = parseConfigText(text, { file: '/x/barbican.yaml' })
    assert.deepEqual(config.log, {
      level: 'info',
      levels: { call: 'warn', upstream: 'debug' },
      format: 'json',
      redact: ['env.*'],
    })
    const err = await failure(() =>
      parseConfigText('upstreams: { a: { command: x } }\nlog: { levels: { calls: warn } }\n', {
        file: '/x/barbican.yaml',
      }),
    )
    assert.match(err.message, /log\.levels/)
  })

  test('reports an empty file as such', async () => {
    const err = await failure(() => parseConfigText('', { file: '/x/barbican.yaml' }))
    assert.match(err.message, /the file is empty/)
  })
})

describe('a variable that is not set, inside upstream entries (ADR 121)', () => {
  const yaml = [
    'upstreams:',
    '  files: { command: npx, args: ["@modelcontextprotocol/server-filesystem@2026.8.31", "/tmp"] }',
    '  web: { url: "${WEB_URL}", headers: { Authorization: "Bearer ${WEB_TOKEN}" } }',
    'servers:',
    '  default: { upstreams: [files, web] }',
    '',
  ].join('\n')

  test('holds back only the entries that use it, with the key and the variable', () => {
    const { config } = parseConfigText(yaml, { env: {} })
    assert.deepEqual(
      config.upstreams.map((u) => u.name),
      ['files'],
    )
    assert.deepEqual(config.held, [
      {
        name: 'web',
        reason:
          'upstreams.web.url needs environment variable WEB_URL, which is not set (set it, or write ${WEB_URL:-default}); ' +
          'upstreams.web.headers.Authorization needs environment variable WEB_TOKEN, which is not set (set it, or write ${WEB_TOKEN:-default})',
      },
    ])
    // The server keeps the namespacing of its full list: names do not change once it is set.
    const [server] = config.servers
    assert.deepEqual(server?.upstreams, ['files'])
    assert.equal(server?.namespacing.mode, 'always')
  })

  test('set, nothing is held', () => {
    const { config } = parseConfigText(yaml, {
      env: { WEB_URL: 'https://mcp.example.com/mcp', WEB_TOKEN: 't' },
    })
    assert.deepEqual(
      config.upstreams.map((u) => u.name),
      ['files', 'web'],
    )
    assert.equal(config.held, undefined)
  })

  test('with strict, it is an error naming each key', () => {
    assert.throws(
      () => parseConfigText(yaml, { env: {}, strict: true }),
      (err: ConfigError) =>
        err.issues.map((i) => formatKeyPath(i.path)).join() ===
        'upstreams.web.url,upstreams.web.headers.Authorization',
    )
  })

  test('outside an upstream entry it is an error, and another mistake is reported with it', () => {
    const text = `${yaml}auth: { apiKeys: { file: "\${KEYS}" } }\n`
    assert.throws(
      () => parseConfigText(text, { env: {} }),
      (err: ConfigError) =>
        err.issues.map((i) => formatKeyPath(i.path)).join() ===
        'upstreams.web.url,upstreams.web.headers.Authorization,auth.apiKeys.file',
    )
  })

  test('a client file holds back its own entry by the name it gives it', () => {
    const text = JSON.stringify({
      mcpServers: {
        github: {
          command: 'npx',
          args: ['@modelcontextprotocol/server-memory@2026.8.31'],
          env: { GITHUB_TOKEN: '${GH_TOKEN}' },
        },
        memory: { command: 'npx', args: ['@modelcontextprotocol/server-memory@2026.8.31'] },
      },
    })
    const { config } = parseConfigText(text, { env: {}, json: true })
    assert.deepEqual(
      config.upstreams.map((u) => u.name),
      ['memory'],
    )
    assert.match(
      config.held?.[0]?.reason ?? '',
      /^mcpServers\.github\.env\.GITHUB_TOKEN needs environment variable GH_TOKEN/,
    )
  })
})
