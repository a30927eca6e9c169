import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { jsonLogger } from '../telemetry/log.ts'
import { type HintGrants, RefusalHints, refusalIn } from './hints.ts'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-hints-')))
after(() => rmSync(dir, { recursive: true, force: true }))
const pkg = join(dir, 'pkg')
const data = join(dir, 'data')
const state = join(dir, 'state')
for (const d of [pkg, data, state]) mkdirSync(d)
writeFileSync(join(data, 'notes.txt'), 'x')
const grants: HintGrants = {
  read: ['/usr', '/etc', pkg],
  write: [state],
  connect: ['127.0.0.1:6379'],
}

describe('refusal hints', () => {
  test('EROFS in its own package: granted read-only; the fix grants the folder a new file goes in', () => {
    const hint = refusalIn(
      'memory',
      grants,
      `EROFS: read-only file system, open '${pkg}/dist/memory.jsonl.tmp'`,
    )
    assert.equal(hint?.access, 'write')
    assert.equal(hint?.fix, `sandbox: { fs: { write: ["${pkg}"] } }`)
    assert.equal(
      hint?.message,
      `Barbican: upstream "memory" is sandboxed; ${pkg}/dist/memory.jsonl.tmp is granted read-only. To grant it, add to its entry ("memory") in the config: sandbox: { fs: { write: ["${pkg}"] } }`,
    )
  })

  test('ENOENT on an existing host file outside the grants asks for read; a new file, its folder for write', () => {
    const read = refusalIn(
      'files',
      grants,
      `ENOENT: no such file or directory, open '${data}/notes.txt'`,
    )
    assert.equal(read?.fix, `sandbox: { fs: { read: ["${data}/notes.txt"] } }`)
    assert.match(read!.message, /is outside its grants/)
    const created = refusalIn(
      'files',
      grants,
      `ENOENT: no such file or directory, open '${data}/new.txt'`,
    )
    assert.equal(created?.fix, `sandbox: { fs: { write: ["${data}"] } }`)
    const mkdir = refusalIn('files', grants, `EACCES: permission denied, mkdir '${data}/sub'`)
    assert.equal(mkdir?.fix, `sandbox: { fs: { write: ["${data}"] } }`)
  })

  test('Python errors are read the same way', () => {
    const hint = refusalIn('py', grants, `[Errno 30] Read-only file system: '${pkg}/cache.db'`)
    assert.equal(hint?.fix, `sandbox: { fs: { write: ["${pkg}"] } }`)
  })

  test('no hint where the sandbox is not the cause', () => {
    // Inside its grants: the server's own failure.
    assert.equal(
      refusalIn('f', grants, `ENOENT: no such file or directory, open '${state}/x'`),
      undefined,
    )
    // Nothing of it exists on the host either.
    assert.equal(
      refusalIn('f', grants, "ENOENT: no such file or directory, open '/nowhere/at/all'"),
      undefined,
    )
    // A granted host.
    assert.equal(refusalIn('f', grants, 'connect ECONNREFUSED 127.0.0.1:6379'), undefined)
    assert.equal(refusalIn('f', grants, 'the query failed: syntax error at "SELEC"'), undefined)
    // Relative paths say nothing of where.
    assert.equal(refusalIn('f', grants, "EROFS: read-only file system, open 'x.txt'"), undefined)
  })

  test('writes into the system parts: no grant helps, and it says so', () => {
    const hint = refusalIn('f', grants, "EROFS: read-only file system, open '/usr/share/x'")
    assert.equal(hint?.fix, undefined)
    assert.match(hint!.message, /system's read-only part.*sandbox: none/)
  })

  test('refused connections, libpq, the egress proxy and DNS name the host and the allow line', () => {
    const node = refusalIn('pg', grants, 'connect ECONNREFUSED 127.0.0.1:5432')
    assert.equal(node?.target, '127.0.0.1:5432')
    assert.equal(node?.fix, 'sandbox: { network: { allow: ["127.0.0.1:5432"] } }')
    const libpq = refusalIn(
      'pg',
      grants,
      'connection to server at "10.0.0.5", port 5433 failed: Connection refused',
    )
    assert.equal(libpq?.target, '10.0.0.5:5433')
    const proxy = refusalIn(
      'gh',
      grants,
      '403 Forbidden: Barbican egress proxy: api.example.com:443 is not in sandbox.network.allow',
    )
    assert.equal(proxy?.fix, 'sandbox: { network: { allow: ["api.example.com:443"] } }')
    assert.match(proxy!.message, /the egress proxy refused it/)
    const dns = refusalIn('gh', grants, 'getaddrinfo EAI_AGAIN api.example.com')
    assert.equal(dns?.target, 'api.example.com:443')
  })

  test("Node's permission model, which names no path, still says which grant and where", () => {
    const hint = refusalIn(
      'memory',
      grants,
      'Access to this API has been restricted. Use --allow-fs-write to manage permissions.',
    )
    assert.equal(hint?.access, 'write')
    assert.match(
      hint!.message,
      /Node\.js permission model.*sandbox: \{ fs: \{ write: \["\/the\/path"\] \} \}/,
    )
  })

  test("the permission model's refusal names the path a server wrote bare in its own words", () => {
    // desktop-commander: it resolves the path first, so the model refuses a read.
    const hint = refusalIn(
      'files',
      grants,
      `Error: Failed to resolve symlink for path: ${data}/new.txt. Error: Access to this API has been restricted. Use --allow-fs-read to manage permissions.`,
    )
    assert.equal(hint?.target, `${data}/new.txt`)
    // It does not exist yet: the read came before creating it, so the folder is granted write.
    assert.equal(hint?.fix, `sandbox: { fs: { write: ["${data}"] } }`)
    const read = refusalIn(
      'files',
      grants,
      `Error: Failed to resolve symlink for path: ${data}/notes.txt. Error: Access to this API has been restricted. Use --allow-fs-read to manage permissions.`,
    )
    assert.equal(read?.fix, `sandbox: { fs: { read: ["${data}/notes.txt"] } }`)
  })

  test('what the permission model never allows says that no grant helps, and what runs it', () => {
    const text =
      "spawn git: Access to this API has been restricted. Use --allow-child-process to manage permissions. { code: 'ERR_ACCESS_DENIED', permission: 'ChildProcess' }"
    const hint = refusalIn('git', grants, text)
    assert.deepEqual(
      [hint?.kind, hint?.target, hint?.fix],
      ['capability', 'child processes', undefined],
    )
    assert.match(hint!.message, /never allows child processes: no grant helps/)
    assert.match(
      hint!.message,
      /bubblewrap, or unconfined with sandbox: none on its entry \("git"\)/,
    )
    const worker = refusalIn(
      'x',
      grants,
      'Access to this API has been restricted. Use --allow-worker to manage permissions.',
    )
    assert.equal(worker?.target, 'worker threads')
  })

  test('annotate appends the hint to an isError result and an error reply, and logs a warn line', () => {
    const lines: string[] = []
    const log = jsonLogger({ write: (l) => lines.push(l) })
    const hints = new RefusalHints('files', () => grants)
    const text = `ENOENT: no such file or directory, open '${data}/new.txt'`
    const result = hints.annotate(
      { kind: 'result' as const, result: { content: [{ type: 'text', text }], isError: true } },
      log,
    )
    const content = result.result.content as { text: string }[]
    assert.equal(content.length, 2)
    assert.match(content[1]!.text, /^Barbican: upstream "files" is sandboxed/)
    const error = hints.annotate({ kind: 'error' as const, message: text }, log)
    assert.match(error.message, /\. Barbican: upstream "files" is sandboxed/)
    const ok = { kind: 'result' as const, result: { content: [{ type: 'text', text }] } }
    assert.equal(hints.annotate(ok, log), ok, 'a result that is not an error is left alone')
    const warn = JSON.parse(lines[0]!) as Record<string, unknown>
    assert.deepEqual(
      [warn.level, warn.msg, warn.upstream, warn.path, warn.fix],
      [
        'warn',
        'sandbox refusal',
        'files',
        `${data}/new.txt`,
        `sandbox: { fs: { write: ["${data}"] } }`,
      ],
    )
  })
})
