import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { parse } from 'yaml'
import { clientConfigPaths, type ImportEnvironment, runImport } from './import.ts'

function tempDir(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'barbican-import-')))
}

async function run(
  files: string[],
  e: {
    cwd: string
    home: string
    platform?: NodeJS.Platform
    facility?: ImportEnvironment['facility']
  },
) {
  let out = ''
  let err = ''
  const asked: string[] = []
  const code = await runImport(
    files,
    {},
    { stdout: (t) => (out += t), stderr: (t) => (err += t) },
    {
      ...e,
      platform: e.platform ?? 'linux',
      facility: e.facility ?? { bwrap: '/usr/bin/bwrap', prlimit: 'prlimit', setpriv: 'setpriv' },
      env: {},
      resolveVersion: async (name) => {
        asked.push(name)
        return name === 'unknown-pkg' ? undefined : { version: '1.4.2', source: 'registry' }
      },
    },
  )
  return { code, out, err, asked }
}

describe('barbican import', () => {
  test('knows the usual places of each client on Linux, macOS and Windows', () => {
    const at = (platform: NodeJS.Platform, env = {}) =>
      clientConfigPaths({ cwd: '/p', home: '/h', platform, env }).map(
        (c) => `${c.client}=${c.path}`,
      )
    assert.ok(at('linux').includes('Claude Desktop=/h/.config/Claude/claude_desktop_config.json'))
    assert.ok(
      at('darwin').includes(
        'Claude Desktop=/h/Library/Application Support/Claude/claude_desktop_config.json',
      ),
    )
    assert.ok(
      at('win32', { APPDATA: '/h/AppData/Roaming' }).some((p) =>
        p.startsWith('VS Code=/h/AppData/Roaming/Code/User/mcp.json'),
      ),
    )
    const linux = at('linux')
    for (const expected of [
      'Cursor=/h/.cursor/mcp.json',
      'Windsurf=/h/.codeium/windsurf/mcp_config.json',
      'VS Code=/p/.vscode/mcp.json',
      'Claude Code=/h/.claude.json',
      'Claude Code=/p/.mcp.json',
    ])
      assert.ok(linux.includes(expected), expected)
  })

  test('finds the files at the usual places and pins every floating npx package', async () => {
    const home = tempDir()
    const cwd = tempDir()
    mkdirSync(join(home, '.config/Claude'), { recursive: true })
    writeFileSync(
      join(home, '.config/Claude/claude_desktop_config.json'),
      JSON.stringify({
        mcpServers: {
          files: { command: 'npx', args: ['-y', '@scope/files', '/data'] },
          both: { command: 'npx', args: ['-y', '-p', 'helper', '-p', 'main@2.0.0', 'main'] },
          secret: { command: 'npx', args: ['tool@3.1.0'], env: { TOKEN: `\${TOKEN}` } },
        },
      }),
    )
    mkdirSync(join(cwd, '.vscode'))
    writeFileSync(
      join(cwd, '.vscode/mcp.json'),
      JSON.stringify({ servers: { remote: { type: 'http', url: 'https://example.com/mcp' } } }),
    )
    const { code, out, err, asked } = await run([], { cwd, home })
    assert.equal(code, 0, err)
    assert.deepEqual(asked.sort(), ['@scope/files', 'helper'])
    const written = parse(readFileSync(join(cwd, 'barbican.yaml'), 'utf8'))
    assert.deepEqual(written.upstreams.files.args, ['-y', '@scope/files@1.4.2', '/data'])
    assert.deepEqual(written.upstreams.both.args, [
      '-y',
      '-p',
      'helper@1.4.2',
      '-p',
      'main@2.0.0',
      'main',
    ])
    // Placeholders are kept: the secret stays in the environment.
    assert.equal(written.upstreams.secret.env.TOKEN, `\${TOKEN}`)
    assert.equal(written.upstreams.remote.url, 'https://example.com/mcp')
    // Which way to run, per client: Claude Desktop launches `barbican stdio` itself; the HTTP
    // clients need `serve` running.
    assert.match(
      out,
      /Claude Desktop starts Barbican itself \(stdio\); nothing to run beside it\.\n {4}In its config, replace "mcpServers" with .*"args": \["stdio", "--config"/,
    )
    assert.match(
      out,
      /VS Code connects over HTTP: keep `barbican serve --config .*` running\.\n {4}In its mcp\.json, replace "servers" with .*"type": "http"/,
    )
    assert.doesNotMatch(out, /Run the gateway/)
  })

  test('a package no source can resolve is named, and the exit code says so', async () => {
    const cwd = tempDir()
    const file = join(cwd, 'claude_desktop_config.json')
    writeFileSync(
      file,
      JSON.stringify({ mcpServers: { x: { command: 'npx', args: ['unknown-pkg'] } } }),
    )
    const { code, err } = await run([file], { cwd, home: cwd })
    assert.equal(code, 1)
    assert.match(err, /x: could not resolve an exact version of unknown-pkg; pin it by hand/)
  })

  test('never overwrites an existing barbican.yaml', async () => {
    const cwd = tempDir()
    writeFileSync(join(cwd, 'barbican.yaml'), 'upstreams: {}\n')
    const { code, err } = await run([], { cwd, home: cwd })
    assert.equal(code, 1)
    assert.match(err, /exists; remove it or write elsewhere with --output FILE/)
    assert.equal(readFileSync(join(cwd, 'barbican.yaml'), 'utf8'), 'upstreams: {}\n')
  })

  test('with no file given and none found, lists where it looked', async () => {
    const cwd = tempDir()
    const { code, err } = await run([], { cwd, home: cwd })
    assert.equal(code, 1)
    assert.match(err, /found no client config/)
    assert.match(err, /Windsurf: .*mcp_config\.json/)
  })

  test('says per entry what it gets on this host', async () => {
    const cwd = tempDir()
    const file = join(cwd, 'claude.json')
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory@1.0.0'] },
          py: { command: 'uvx', args: ['mcp-server-time==1.0.0'] },
          legacy: { command: 'uvx', args: ['tool==1.0.0'], sandbox: 'none' },
          remote: { url: 'https://example.com/mcp' },
        },
      }),
    )
    const missing = { missing: 'bubblewrap (the `bwrap` program)' }
    const without = await run([file], { cwd, home: cwd, facility: missing })
    assert.match(without.out, /sandbox memory: confined by the Node\.js permission model/)
    assert.match(
      without.out,
      /sandbox py: refused: this host lacks bubblewrap .*sandbox: none.*fallback: unconfined/,
    )
    assert.match(without.out, /sandbox legacy: unconfined \(sandbox: none\)/)
    assert.doesNotMatch(without.out, /sandbox remote/)
    const other = tempDir()
    writeFileSync(join(other, 'claude.json'), readFileSync(file))
    const withBwrap = await run([join(other, 'claude.json')], { cwd: other, home: other })
    assert.match(withBwrap.out, /sandbox py: confined by bubblewrap/)
  })

  test('names the grants each imported server gets, and where each came from', async () => {
    const cwd = tempDir()
    const data = join(cwd, 'data')
    mkdirSync(data)
    const file = join(cwd, 'claude.json')
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          files: {
            command: 'npx',
            args: ['-y', '@modelcontextprotocol/server-filesystem@1.0.0', data],
          },
          memory: {
            command: 'npx',
            args: ['-y', '@modelcontextprotocol/server-memory@1.0.0'],
            env: { MEMORY_FILE_PATH: join(data, 'memory.jsonl') },
          },
          db: {
            command: 'npx',
            args: ['-y', '@modelcontextprotocol/server-postgres@1.0.0', 'postgresql://127.0.0.1/x'],
          },
          plain: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything@1.0.0'] },
          legacy: { command: 'npx', args: ['-y', 'x@1.0.0', data], sandbox: 'none' },
        },
      }),
    )
    const { code, out } = await run([file], { cwd, home: '/nonexistent-home' })
    assert.equal(code, 0, out)
    assert.match(out, /sandbox files: confined by bubblewrap\n {8}grant: write \S+\/data \(arg 3/)
    assert.match(out, /sandbox memory: [^\n]*\n {8}grant: write \S+\/data \(env MEMORY_FILE_PATH/)
    assert.match(out, /sandbox db: [^\n]*\n {8}grant: connect 127\.0\.0\.1:5432 \(arg 3\)/)
    assert.match(out, /sandbox plain: [^\n]*\n {8}grants: none beyond its own package and state\n/)
    // sandbox: none grants nothing: it runs with Barbican's rights.
    assert.match(out, /sandbox legacy: unconfined \(sandbox: none\)\n(?! {8})/)
  })

  test('says a path naming the file it writes is not granted', async () => {
    const cwd = tempDir()
    const file = join(cwd, 'claude.json')
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          peek: { command: 'npx', args: ['-y', 'x@1.0.0', join(cwd, 'barbican.yaml')] },
        },
      }),
    )
    const { out } = await run([file], { cwd, home: '/nonexistent-home' })
    assert.match(
      out,
      /sandbox peek: [^\n]*\n {8}not granted: \S+barbican\.yaml \(arg 3\): it is Barbican's own file/,
    )
  })
})
