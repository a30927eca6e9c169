import assert from 'node:assert/strict'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import type { StdioUpstreamConfig } from './config.ts'
import { ConfigError, formatKeyPath } from './config-error.ts'
import { LOOPBACK_ORIGINS } from './defaults.ts'
import { parseConfigText } from './load.ts'
import { normalizeConfig, stateRootOf } from './normalize.ts'

/** Runs normalizeConfig expecting failure; returns "path: message" lines. */
function problems(input: unknown): string[] {
  try {
    normalizeConfig(input)
  } catch (err) {
    assert.ok(err instanceof ConfigError)
    assert.ok(err instanceof BarbicanError)
    assert.equal(err.code, 'ERR_CONFIG_INVALID')
    return err.issues.map((issue) => `${formatKeyPath(issue.path)}: ${issue.message}`)
  }
  assert.fail('expected a ConfigError')
}

function pathsOf(lines: string[]): string[] {
  return lines.map((line) => line.slice(0, line.indexOf(': ')))
}

const one = { upstreams: { everything: { command: 'node', args: ['server.js'] } } }

describe('normalizeConfig', () => {
  test('applies every documented default to a minimal config', () => {
    const config = normalizeConfig(one)
    assert.deepEqual(config, {
      listen: { host: '127.0.0.1', port: 7300 },
      security: {
        allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
        allowedOrigins: [
          'http://localhost',
          'http://127.0.0.1',
          'http://[::1]',
          'https://localhost',
          'https://127.0.0.1',
          'https://[::1]',
        ],
        allowInsecureNonLoopback: false,
      },
      limits: {
        maxMessageBytes: 4194304,
        maxDepth: 64,
        maxStringLength: 2097152,
        maxArrayLength: 100000,
        maxObjectKeys: 10000,
        maxBodyBytes: 4194304,
        requestTimeoutMs: 120000,
        upstreamRequestTimeoutMs: 60000,
        upstreamConnectTimeoutMs: 30000,
        maxSessions: 1000,
        maxSessionsPerIdentity: 100,
        sessionIdleTimeoutMs: 1800000,
        listPageSize: 500,
        heldCallTimeoutMs: 120000,
        listDeadlineMs: 3000,
        handshakeWaitMs: 500,
        listRetryMs: 1000,
        listRetryMaxMs: 60000,
        upstreamMaxQueuedBytes: 8388608,
        upstreamMaxCallOutputBytes: 16777216,
        searchMaxTerms: 16,
        searchMaxExpansions: 48,
        searchMaxResults: 50,
        searchBudgetMs: 25,
        metaToolCallsPerMinute: 120,
      },
      log: { level: 'info', levels: {}, format: 'auto', redact: [] },
      metrics: { enabled: true, maxTools: 100 },
      audit: {
        enabled: true,
        rawArguments: false,
        retentionDays: 0,
        checkpointIntervalMs: 60000,
        durability: 'batched',
        batchWindowMs: 200,
      },
      upstreams: [
        {
          name: 'everything',
          transport: 'stdio',
          command: 'node',
          args: ['server.js'],
          env: {},
          lazy: false,
          idleTimeoutMs: 0,
          requestTimeoutMs: 60000,
          sandbox: {
            stateDir: join(stateRootOf({}), 'everything'),
            read: [],
            write: [],
            grants: { paths: [], connect: [], prefixes: [], refused: [], code: [] },
            connect: [],
            packageCache: join(stateRootOf({}), '../npm'),
            protect: [
              join(process.cwd(), 'barbican.lock'),
              ...['', '-wal', '-shm', '-journal'].map((end) =>
                join(process.cwd(), `.barbican/barbican.db${end}`),
              ),
            ],
            limits: {
              memoryBytes: 2048 * 1024 * 1024,
              processes: 256,
              cpuSeconds: 86400,
              fileBytes: 1024 * 1024 * 1024,
            },
          },
        },
      ],
      servers: [
        {
          name: 'default',
          path: '/mcp',
          upstreams: ['everything'],
          namespacing: { mode: 'never', separator: '__' },
          tools: {
            include: undefined,
            exclude: [],
            rename: {},
            descriptions: {},
          },
          prompts: { include: undefined, exclude: [], rename: {} },
          resources: { include: undefined, exclude: [] },
          exposure: {
            mode: 'all',
            pinned: [],
            namesBudget: 2000,
            code: {
              memoryMb: 64,
              timeoutMs: 30_000,
              maxCalls: 100,
              maxOutputKb: 64,
              maxConcurrent: 8,
            },
          },
        },
      ],
    })
  })

  test('keeps sandbox: none, resolves granted paths and keeps the egress allow list', () => {
    const upstream = (sandbox: unknown) =>
      normalizeConfig(
        { upstreams: { s: { command: 'node', sandbox } } },
        { baseDir: '/srv/gw', configPath: '/srv/gw/barbican.yaml' },
      ).upstreams[0] as StdioUpstreamConfig
    assert.equal(upstream('none').sandbox, 'none')
    const confined = upstream({
      fs: { read: ['ro'], write: ['/data'] },
      stateDir: 'st',
      limits: { processes: 8 },
    }).sandbox
    assert.ok(confined !== 'none')
    assert.deepEqual(confined.read, ['/srv/gw/ro'])
    assert.deepEqual(confined.write, ['/data'])
    assert.equal(confined.stateDir, '/srv/gw/st')
    assert.equal(confined.limits.processes, 8)
    assert.equal(confined.limits.memoryBytes, 2048 * 1024 * 1024)
    assert.ok(confined.protect.includes('/srv/gw/barbican.yaml'))
    assert.equal(confined.network, undefined, 'no hosts: no proxy, no network')
    const egress = upstream({ network: { allow: ['api.example.com', '*.cdn.example.net:8443'] } })
    assert.ok(egress.sandbox !== 'none')
    assert.deepEqual(egress.sandbox.network, {
      allow: ['api.example.com', '*.cdn.example.net:8443'],
      maxConnections: 32,
    })
    assert.throws(
      () => upstream({ network: { allow: ['api.example.com:http'] } }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.issues.some((i) => /the port must be 1-65535/.test(i.message)),
    )
  })

  test('namespaces always with several upstreams and never with one when the mode is auto', () => {
    const config = normalizeConfig({
      upstreams: { a: { command: 'a' }, b: { url: 'https://b.example/mcp' } },
      servers: {
        default: {},
        solo: { upstreams: ['b'] },
        pinned: { upstreams: ['a', 'b'], namespacing: { mode: 'on-conflict' } },
      },
    })
    const modes = Object.fromEntries(config.servers.map((s) => [s.name, s.namespacing.mode]))
    assert.deepEqual(modes, { default: 'always', solo: 'never', pinned: 'on-conflict' })
    assert.deepEqual(config.servers[0]?.upstreams, ['a', 'b'])
  })

  test('serves the server named default at /mcp and every other at /mcp/NAME', () => {
    const config = normalizeConfig({
      upstreams: { a: { command: 'a' } },
      servers: { files: { upstreams: ['a'] }, default: { upstreams: ['a'] } },
    })
    assert.deepEqual(
      config.servers.map((s) => [s.name, s.path]),
      [
        ['files', '/mcp/files'],
        ['default', '/mcp'],
      ],
    )
  })

  test('reads listen as "HOST:PORT", bracketed IPv6 included, or as an object', () => {
    assert.deepEqual(normalizeConfig({ ...one, listen: '0.0.0.0:8080' }).listen, {
      host: '0.0.0.0',
      port: 8080,
    })
    assert.deepEqual(normalizeConfig({ ...one, listen: '[::1]:0' }).listen, {
      host: '::1',
      port: 0,
    })
    assert.deepEqual(normalizeConfig({ ...one, listen: { port: 9000 } }).listen, {
      host: '127.0.0.1',
      port: 9000,
    })
  })

  test('lets --listen replace the file and rejects a malformed one', () => {
    const config = normalizeConfig({ ...one, listen: '127.0.0.1:1' }, { listen: 'localhost:2' })
    assert.deepEqual(config.listen, { host: 'localhost', port: 2 })
    assert.throws(
      () => normalizeConfig(one, { listen: 'localhost' }),
      (err: ConfigError) =>
        err.code === 'ERR_CONFIG_INVALID' && err.issues[0]?.path[0] === '--listen',
    )
  })

  test('allows the bound host as Host header when it is a specific address, never a wildcard', () => {
    const specific = normalizeConfig({ ...one, listen: '192.168.1.5:7300' })
    assert.deepEqual(specific.security.allowedHosts, [
      'localhost',
      '127.0.0.1',
      '[::1]',
      '192.168.1.5',
    ])
    const wildcard = normalizeConfig({ ...one, listen: '0.0.0.0:7300' })
    assert.deepEqual(wildcard.security.allowedHosts, ['localhost', '127.0.0.1', '[::1]'])
    const explicit = normalizeConfig({ ...one, security: { allowedHosts: ['MCP.example.com'] } })
    assert.deepEqual(explicit.security.allowedHosts, ['mcp.example.com'])
  })

  test('allows loopback origins always and adds configured ones, keeping their port rule', () => {
    const loopback = normalizeConfig(one).security.allowedOrigins
    assert.deepEqual(loopback, [...LOOPBACK_ORIGINS])
    const config = normalizeConfig({
      ...one,
      security: { allowedOrigins: ['https://App.example.com/', 'http://10.0.0.2:8080', 'null'] },
    })
    assert.deepEqual(config.security.allowedOrigins, [
      ...LOOPBACK_ORIGINS,
      'https://app.example.com',
      'http://10.0.0.2:8080',
      'null',
    ])
  })

  test('accepts every host and origin form the HTTP guard understands, and nothing else', () => {
    const hosts = ['localhost', 'mcp.example.com:443', '*.example.com', '[::1]', '[::1]:7300', '*']
    assert.deepEqual(
      normalizeConfig({ ...one, security: { allowedHosts: hosts } }).security.allowedHosts,
      hosts,
    )
    const lines = problems({
      ...one,
      security: {
        allowedHosts: ['http://localhost', 'a b', ''],
        allowedOrigins: ['https://a.example/path', 'localhost', 'ftp://x.example'],
      },
    })
    assert.deepEqual(pathsOf(lines), [
      'security.allowedHosts[0]',
      'security.allowedHosts[1]',
      'security.allowedHosts[2]',
      'security.allowedOrigins[0]',
      'security.allowedOrigins[1]',
      'security.allowedOrigins[2]',
    ])
  })

  test('turns numbers and booleans in args, env and headers into strings', () => {
    const config = normalizeConfig({
      upstreams: {
        a: { command: 'x', args: ['--port', 3000, true], env: { DEBUG: false } },
        b: { url: 'https://b.example', headers: { 'X-Retries': 3 } },
      },
    })
    const [a, b] = config.upstreams
    assert.equal(a?.transport, 'stdio')
    if (a?.transport === 'stdio') {
      assert.deepEqual(a.args, ['--port', '3000', 'true'])
      assert.deepEqual(a.env, { DEBUG: 'false' })
    }
    assert.ok(b && 'headers' in b)
    assert.deepEqual(b.headers, { 'X-Retries': '3' })
  })

  test('resolves auto to websocket for ws:// urls and keeps auto for http', () => {
    const config = normalizeConfig({
      upstreams: { w: { url: 'wss://x.example/ws' }, h: { url: 'http://127.0.0.1:1/mcp' } },
    })
    assert.deepEqual(
      config.upstreams.map((u) => u.transport),
      ['websocket', 'auto'],
    )
  })

  test('takes each upstream request timeout from limits unless it sets its own', () => {
    const config = normalizeConfig({
      limits: { upstreamRequestTimeoutMs: 1234 },
      upstreams: { a: { command: 'a' }, b: { command: 'b', requestTimeoutMs: 99 } },
    })
    assert.deepEqual(
      config.upstreams.map((u) => u.requestTimeoutMs),
      [1234, 99],
    )
  })

  test('keeps the state of a config without a folder in the temp directory, never in the cwd', () => {
    const upstreams = { s: { command: 'node', args: ['s.js'] } }
    const stateDir = (config: { upstreams: readonly unknown[] }) =>
      ((config.upstreams[0] as StdioUpstreamConfig).sandbox as { stateDir: string }).stateDir
    // Built in code, or text without a file (even with a cwd for its paths): no folder of its
    // own, so not the checkout's.
    for (const config of [
      normalizeConfig({ upstreams }),
      parseConfigText(JSON.stringify({ upstreams }), { json: true }).config,
      parseConfigText(JSON.stringify({ upstreams }), { json: true, cwd: process.cwd() }).config,
    ]) {
      assert.ok(stateDir(config).startsWith(join(tmpdir(), 'barbican-unfiled-')), stateDir(config))
      assert.ok(!stateDir(config).startsWith(process.cwd()), 'nothing under the working directory')
    }
    // A folder given, or a file, keeps it beside them.
    assert.equal(
      stateDir(normalizeConfig({ upstreams }, { baseDir: '/srv/gw' })),
      '/srv/gw/.barbican/state/s',
    )
    const filed = parseConfigText(JSON.stringify({ upstreams }), { file: '/srv/gw/barbican.json' })
    assert.equal(stateDir(filed.config), '/srv/gw/.barbican/state/s')
  })

  test('resolves a relative cwd against the config directory', () => {
    const config = normalizeConfig(
      { upstreams: { a: { command: 'a', cwd: 'servers/a' }, b: { command: 'b', cwd: '/srv/b' } } },
      { baseDir: '/etc/barbican' },
    )
    const cwds = config.upstreams.map((u) => ('cwd' in u ? u.cwd : undefined))
    assert.deepEqual(cwds, [resolve('/etc/barbican/servers/a'), '/srv/b'])
  })

  test('resolves the files auth names against the config directory, like every other path', () => {
    const at = (auth: unknown) =>
      normalizeConfig({ upstreams: { a: { command: 'a' } }, auth }, { baseDir: '/etc/barbican' })
        .auth
    const relative = at({ apiKeys: { file: 'keys.json' }, tokens: { sqlite: 'state/tokens.db' } })
    assert.equal(relative?.apiKeys?.file, resolve('/etc/barbican/keys.json'))
    assert.deepEqual(relative?.tokens, { sqlite: resolve('/etc/barbican/state/tokens.db') })
    const fixed = at({ apiKeys: { file: '/srv/keys.json' }, tokens: { sqlite: ':memory:' } })
    assert.equal(fixed?.apiKeys?.file, '/srv/keys.json')
    assert.deepEqual(fixed?.tokens, { sqlite: ':memory:' })
  })

  test('returns a deeply frozen config so no consumer can change it under another', () => {
    const config = normalizeConfig(one)
    assert.ok(Object.isFrozen(config))
    assert.ok(Object.isFrozen(config.upstreams[0]))
    assert.ok(Object.isFrozen(config.servers[0]?.tools.exclude))
  })
})

describe('validation errors', () => {
  test('reports every problem of a broken config at once, each at its exact key path', () => {
    const lines = problems({
      listen: 'nowhere',
      limits: { maxDepth: 1.5, requestTimeoutMs: 0 },
      log: { level: 'loud' },
      extra: true,
      upstreams: {
        files: { command: 'x', args: ['ok', { nested: 1 }] },
        'bad.name': { command: 'x' },
        empty: {},
        remote: { url: 'ftp://x.example' },
        nothing: null,
      },
      servers: {
        docs: {
          upstreams: ['files', 'files'],
          namespacing: { mode: 'sometimes', separator: '' },
          tools: { rename: { a: 'same', b: 'same', c: 'not allowed' } },
        },
        none: { upstreams: [] },
      },
    })
    assert.deepEqual(pathsOf(lines).sort(), [
      'extra',
      'limits.maxDepth',
      'limits.requestTimeoutMs',
      'listen',
      'log.level',
      'servers.docs.namespacing.mode',
      'servers.docs.namespacing.separator',
      'servers.docs.tools.rename.b',
      'servers.docs.tools.rename.c',
      'servers.docs.upstreams[1]',
      'servers.none.upstreams',
      'upstreams.empty',
      'upstreams.files.args[1]',
      'upstreams.nothing',
      'upstreams.remote.url',
      'upstreams["bad.name"]',
    ])
    const text = lines.join('\n')
    assert.match(
      text,
      /upstreams\.files\.args\[1\]: expected a string, number or boolean, got a mapping/,
    )
    assert.match(text, /upstreams\.empty: expected a mapping with "command", "url" or "wasm"/)
    assert.match(text, /log\.level: expected one of "debug", "info", "warn", "error", got "loud"/)
    assert.match(text, /limits\.maxDepth: expected an integer, got the fraction 1.5/)
    assert.match(text, /limits\.requestTimeoutMs: must be at least 1/)
    assert.match(text, /servers\.none\.upstreams: must have at least 1 item/)
    assert.match(
      text,
      /upstreams\.nothing: expected a mapping of keys to values, got nothing \(null\)/,
    )
  })

  test('names both the virtual server and the upstream it refers to when the upstream is unknown', () => {
    const lines = problems({
      upstreams: { a: { command: 'a' } },
      servers: { files: { upstreams: ['fs'] } },
    })
    assert.deepEqual(lines, [
      'servers.files.upstreams[0]: server "files" names upstream "fs", which is not defined (defined upstreams: a)',
    ])
  })

  test('requires at least one upstream, with a message that says what to add', () => {
    assert.deepEqual(problems({}), [
      'upstreams: is required: name at least one upstream MCP server',
    ])
    assert.deepEqual(problems({ upstreams: {} }), ['upstreams: at least one upstream is required'])
  })

  test('rejects upstream and server names that contain the namespacing separator', () => {
    assert.deepEqual(pathsOf(problems({ upstreams: { my__files: { command: 'a' } } })), [
      'upstreams.my__files',
    ])
    const lines = problems({
      upstreams: { 'a-b': { command: 'a' }, c: { command: 'c' } },
      servers: { 'x-y': { namespacing: { separator: '-' } } },
    })
    assert.deepEqual(pathsOf(lines).sort(), ['servers.x-y', 'upstreams.a-b'])
    assert.match(lines.join('\n'), /contains the namespacing separator "-" of server "x-y"/)
  })

  test('rejects names that are not 1-64 letters, digits, "_" or "-"', () => {
    const lines = problems({
      upstreams: { '-x': { command: 'a' }, [`a${'b'.repeat(64)}`]: { command: 'a' } },
    })
    assert.equal(lines.length, 2)
    for (const line of lines) assert.match(line, /must be 1-64 letters, digits, "_" or "-"/)
  })

  test('gives one clear message for an upstream with both command and url', () => {
    assert.deepEqual(
      problems({ upstreams: { both: { command: 'a', url: 'https://x.example' } } }),
      [
        'upstreams.both: has both "command" (a local server) and "url" (a remote server); keep exactly one',
      ],
    )
  })

  test('suggests the intended key for a misspelt one and lists the keys otherwise', () => {
    const lines = problems({ upstreams: { a: { comand: 'x', args: [{}] } }, lisen: '1' })
    // The misspelling does not hide the other problems of the same entry.
    assert.ok(
      lines.includes('upstreams.a.args[0]: expected a string, number or boolean, got a mapping'),
    )
    assert.equal(lines.length, 3, lines.join('\n'))
    assert.ok(
      lines.includes('upstreams.a.comand: unknown key (did you mean "command"?)'),
      lines.join('\n'),
    )
    assert.ok(lines.includes('lisen: unknown key (did you mean "listen"?)'), lines.join('\n'))
    const other = problems({ ...one, color: 'blue' })
    assert.deepEqual(other, [
      'color: unknown key; expected one of: listen, security, limits, log, metrics, auth, sandbox, upstreams, servers, tenants, store, redis, audit, rateLimits, guards, confirm, contexts, cedar',
    ])
  })

  test('rejects a transport that contradicts the url scheme', () => {
    assert.deepEqual(
      pathsOf(
        problems({
          upstreams: {
            a: { url: 'https://x.example', transport: 'websocket' },
            b: { url: 'ws://x.example', transport: 'sse' },
          },
        }),
      ),
      ['upstreams.a.transport', 'upstreams.b.transport'],
    )
  })

  test('rejects duplicate rename targets and repeated upstreams in a server', () => {
    const lines = problems({
      upstreams: { a: { command: 'a' } },
      servers: { s: { upstreams: ['a', 'a'], prompts: { rename: { x: 'p', y: 'p' } } } },
    })
    assert.deepEqual(pathsOf(lines).sort(), [
      'servers.s.prompts.rename.y',
      'servers.s.upstreams[1]',
    ])
  })

  test('rejects an empty servers mapping instead of serving nothing', () => {
    assert.deepEqual(pathsOf(problems({ ...one, servers: {} })), ['servers'])
  })

  test('never repeats a string value found under env or headers in a message', () => {
    const lines = problems({
      upstreams: {
        a: { command: 'x', env: { TOKEN: ['sk-secret-value'] } },
        b: { url: 'https://x.example', headers: { 'Bad Header': 'sk-secret-value' } },
      },
    })
    assert.equal(lines.length, 2)
    assert.doesNotMatch(lines.join('\n'), /sk-secret-value/)
  })
})
