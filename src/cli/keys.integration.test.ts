import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { runCli as run } from '../../test/support/cli.ts'
import { startServer } from '../app/server.ts'
import { loadConfig } from '../config/load.ts'
import { openSync } from '../credentials/secret-box.ts'
import { silentLogger } from '../telemetry/log.ts'

const repo = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(repo, 'bin/barbican.js')
const memoryServer = join(repo, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')
const root = mkdtempSync(join(tmpdir(), 'barbican-keys-'))
after(() => rmSync(root, { recursive: true, force: true }))
let n = 0

/** A config folder whose auth section names `./keys.json`, relative to the config file. */
function configDir(auth: Record<string, unknown> = { apiKeys: { file: './keys.json' } }) {
  const dir = join(root, `c${n++}`)
  mkdirSync(dir)
  const file = join(dir, 'barbican.json')
  writeFileSync(
    file,
    JSON.stringify({
      listen: '127.0.0.1:0',
      auth,
      upstreams: {
        memory: {
          command: process.execPath,
          args: [memoryServer],
          env: { MEMORY_FILE_PATH: join(root, 'memory.jsonl') },
          lazy: true,
        },
      },
    }),
  )
  return { dir, file }
}

function initialize(url: string, key: string): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'keys-test', version: '1' },
      },
    }),
  })
}

describe('barbican keys', () => {
  test('create prints the key once and writes only its hash, beside the config file', async () => {
    const { dir, file } = configDir()
    // The working directory is the checkout: the keys file must still land beside the config.
    const created = await run([
      'keys',
      'create',
      'ci-bot',
      '--scope',
      'mcp:tools',
      '--scope',
      'mcp:read',
      '--tenant',
      'acme',
      '--config',
      file,
    ])
    assert.equal(created.code, 0, created.stderr)
    const key = created.stdout.trim()
    assert.match(key, /^bk_[A-Za-z0-9_-]{43}$/)
    assert.match(created.stderr, /shown once/)
    const keysFile = join(dir, 'keys.json')
    const text = readFileSync(keysFile, 'utf8')
    assert.ok(!text.includes(key), 'the key itself is never stored')
    const [entry] = JSON.parse(text).keys
    assert.deepEqual(
      { ...entry, createdAt: undefined, hash: undefined },
      {
        id: 'ci-bot',
        subject: 'ci-bot',
        tenant: 'acme',
        scopes: ['mcp:tools', 'mcp:read'],
        createdAt: undefined,
        hash: undefined,
      },
    )
    assert.match(entry.hash, /^sha256:[0-9a-f]{64}$/)
    assert.equal(statSync(keysFile).mode & 0o777, 0o600)

    const listed = await run(['keys', 'list', '--config', file])
    assert.equal(listed.code, 0, listed.stderr)
    assert.match(
      listed.stdout,
      /^ci-bot {2}subject ci-bot tenant acme scopes mcp:tools mcp:read {2}sha256:/m,
    )
    assert.ok(!listed.stdout.includes(key))

    const again = await run(['keys', 'create', 'ci-bot', '--config', file])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /a key "ci-bot" exists already/)

    // Creation and revocation are administrative acts in the audit log.
    const revoked = await run(['keys', 'revoke', 'ci-bot', '--as', 'ops', '--config', file])
    assert.equal(revoked.code, 0, revoked.stderr)
    const audit = await run(['audit', 'query', '--tool', 'ci-bot', '--config', file])
    assert.deepEqual(
      audit.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line))
        .map((r) => [r.type, r.action, r.target, r.outcome]),
      [
        ['admin', 'key.create', 'ci-bot', 'ok'],
        ['admin', 'key.revoke', 'ci-bot', 'ok'],
      ],
    )
    assert.match(audit.stdout, /"actor":"ops"/)
  })

  test('a key revoked with the command is refused by a running gateway on its next request', async () => {
    const { file } = configDir()
    const key = (await run(['keys', 'create', 'ops', '--config', file])).stdout.trim()
    const loaded = await loadConfig({ path: file })
    assert.ok(loaded)
    const server = await startServer(loaded.config, silentLogger)
    try {
      assert.equal((await initialize(server.url, key)).status, 200)
      const revoked = await run(['keys', 'revoke', 'ops', '--config', file])
      assert.equal(revoked.code, 0, revoked.stderr)
      assert.match(revoked.stdout, /revoked ops/)
      assert.equal((await initialize(server.url, key)).status, 401)
      assert.deepEqual(JSON.parse(readFileSync(loaded.config.auth!.apiKeys!.file!, 'utf8')), {
        keys: [],
      })
    } finally {
      await server.stop()
    }
    const missing = await run(['keys', 'revoke', 'ops', '--config', file])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /no key "ops" in .*keys\.json/)
  })

  test('create and revoke need a keys file; keys in the config itself are listed, not edited', async () => {
    const hash = `sha256:${'a'.repeat(64)}`
    const { file } = configDir({ apiKeys: { keys: [{ id: 'static', hash, subject: 'svc' }] } })
    const create = await run(['keys', 'create', 'x', '--config', file])
    assert.equal(create.code, 1)
    assert.match(create.stderr, /names no keys file/)
    const listed = await run(['keys', 'list', '--config', file])
    assert.match(
      listed.stdout,
      /^static {2}subject svc {2}sha256:a{12}… {2}\(in the configuration\)$/m,
    )
    const usage = await run(['keys', 'remove', 'x', '--config', file])
    assert.equal(usage.code, 2)
    assert.match(usage.stderr, /unknown keys action "remove" \(create, list, revoke\)/)
  })
})

describe('barbican check, auth section', () => {
  test('fails on a keys file that does not exist, and names every fault of a broken one', async () => {
    const { dir, file } = configDir()
    const absent = await run(['check', '--config', file])
    assert.equal(absent.code, 1)
    assert.ok(
      absent.stdout.includes(`FAIL  auth.apiKeys.file: ${join(dir, 'keys.json')}: does not exist`),
      absent.stdout,
    )
    assert.match(absent.stderr, /the auth section has 1 fault/)

    writeFileSync(
      join(dir, 'keys.json'),
      JSON.stringify({ keys: [{ id: 'a', subject: 's', hash: 'sha256:beef' }, { id: 'a' }] }),
    )
    const broken = await run(['check', '--config', file])
    assert.equal(broken.code, 1)
    assert.match(
      broken.stdout,
      /keys\[0\]\.hash must be "sha256:" and 64 hex digits; keys\[1\]\.id "a" is used twice; keys\[1\]\.subject is missing/,
    )

    assert.equal(
      (await run(['keys', 'create', 'ok', '--config', file])).code,
      1,
      'broken file kept',
    )
    writeFileSync(join(dir, 'keys.json'), '{"keys": []}')
    const fine = await run(['check', '--config', file])
    assert.equal(fine.code, 0, fine.stdout + fine.stderr)
  })
})

describe('barbican seal', () => {
  const secretKey = Buffer.alloc(32, 7)

  function seal(args: string[], input: string, env: Record<string, string>) {
    return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [bin, 'seal', ...args],
        { env: { PATH: process.env.PATH, ...env }, timeout: 30_000 },
        (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
      )
      child.stdin?.end(input)
    })
  }

  test('reads the secret from stdin and seals it for exactly one slot', async () => {
    const env = { BARBICAN_SECRET_KEY: secretKey.toString('base64') }
    const header = await seal(
      ['--upstream', 'github', '--header', 'Authorization'],
      'Bearer ghp_s3cret\n',
      env,
    )
    assert.equal(header.code, 0, header.stderr)
    const sealed = header.stdout.trim()
    assert.match(sealed, /^enc:v1:[A-Za-z0-9_-]+$/)
    assert.equal(
      openSync(secretKey, sealed, 'upstream:github:header:authorization'),
      'Bearer ghp_s3cret',
    )
    assert.throws(() => openSync(secretKey, sealed, 'upstream:other:header:authorization'))

    const variable = await seal(['--upstream', 'files', '--env', 'API_KEY'], 'k3y', env)
    assert.equal(openSync(secretKey, variable.stdout.trim(), 'upstream:files:env:API_KEY'), 'k3y')
  })

  test('refuses a value on the command line, a missing key and an empty stdin', async () => {
    const env = { BARBICAN_SECRET_KEY: secretKey.toString('hex') }
    const argv = await seal(['--upstream', 'a', '--env', 'X', 'the-secret'], '', env)
    assert.equal(argv.code, 2)
    assert.match(argv.stderr, /takes the secret on stdin, never as an argument/)
    assert.ok(!argv.stderr.includes('the-secret'))
    assert.ok(!argv.stdout.includes('enc:v1:'))
    const noKey = await seal(['--upstream', 'a', '--env', 'X'], 'v', {})
    assert.equal(noKey.code, 1)
    assert.match(noKey.stderr, /BARBICAN_SECRET_KEY is not set/)
    const empty = await seal(['--upstream', 'a', '--env', 'X'], '', env)
    assert.equal(empty.code, 1)
    assert.match(empty.stderr, /no secret on stdin/)
    const both = await seal(['--upstream', 'a', '--env', 'X', '--header', 'Y'], 'v', env)
    assert.equal(both.code, 2)
  })
})
