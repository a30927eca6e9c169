/**
 * Issue 31 point 1: a store writer without the audit key cannot delete, rewrite, reorder or
 * append without `barbican audit verify --checkpoint FILE` failing against the published
 * checkpoints (ADR 102). The logs are written by the CLI as users run it (`pins baseline`,
 * which records an admin act and signs a shutdown checkpoint), and tampered with by the tools an
 * attacker with the database would use: the `sqlite3` shell and `psql`.
 */
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { hash } from 'node:crypto'
import { copyFileSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { dropPostgresSchemas, freshPostgresUrl } from '../support/backends.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const run = promisify(execFile)
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const UPSTREAMS = `upstreams:\n  everything:\n    command: ${process.execPath}\n    args: ["${everything}", "stdio"]\n`

after(dropPostgresSchemas)

async function barbican(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await run(process.execPath, [bin, ...args], {
      timeout: 60_000,
      env: { ...process.env, ...env },
    })
    return { code: 0, stdout }
  } catch (err) {
    const e = err as { code?: number; stdout?: string }
    return { code: e.code ?? -1, stdout: e.stdout ?? '' }
  }
}

/** A store as the attacker sees it: SQL in, text rows out, and a way back to the original. */
interface Store {
  readonly records: string
  readonly checkpoints: string
  sql(statements: string): string
  save(): void
  restore(): void
}

/** The unkeyed hash anyone can compute (the chain before ADR 102). */
const sha = (seq: number, at: string, prev: string, body: string) =>
  hash('sha256', `barbican-audit v1\n${seq}\n${at}\n${prev}\n${body}`, 'hex')
const quote = (s: string) => `'${s.replaceAll("'", "''")}'`

function tamperCases(s: Store): [string, () => void, RegExp][] {
  const rows = () =>
    s
      .sql(`SELECT seq, at, prev_hash, body FROM ${s.records} ORDER BY seq`)
      .trim()
      .split('\n')
      .map((line) => {
        const [seq, at, prev, ...body] = line.split('|')
        return { seq: Number(seq), at: at!, prev: prev!, body: body.join('|') }
      })
  return [
    [
      'tail deleted with its checkpoints',
      () =>
        s.sql(
          `DELETE FROM ${s.records} WHERE seq > 1; DELETE FROM ${s.checkpoints} WHERE seq > 1;`,
        ),
      /^FAIL {2}checkpoint 2: missing from the store: the published shutdown checkpoint .* covering record 2, is not there/m,
    ],
    [
      'chain rewritten, re-hashed, every checkpoint deleted',
      () => {
        let prev = '0'.repeat(64)
        const updates = rows().map((r) => {
          const body = r.body.replace('"actor":"olga"', '"actor":"alice"')
          const h = sha(r.seq, r.at, prev, body)
          const u = `UPDATE ${s.records} SET body = ${quote(body)}, subject = 'alice', prev_hash = '${prev}', hash = '${h}' WHERE seq = ${r.seq};`
          prev = h
          return u
        })
        s.sql(`${updates.join('\n')} DELETE FROM ${s.checkpoints};`)
      },
      /^FAIL {2}checkpoint 1: missing from the store/m,
    ],
    [
      'records reordered',
      () =>
        s.sql(
          `UPDATE ${s.records} SET seq = -2 WHERE seq = 2; UPDATE ${s.records} SET seq = 2 WHERE seq = 3; UPDATE ${s.records} SET seq = 3 WHERE seq = -2;`,
        ),
      /^FAIL {2}record 2: does not follow record 1 \(records were reordered/m,
    ],
    [
      'forged record appended after the shutdown checkpoint',
      () => {
        const last = rows().at(-1)!
        const row = s.sql(`SELECT hash FROM ${s.records} WHERE seq = ${last.seq}`).trim()
        const body = last.body.replace('"actor":"olga"', '"actor":"mallory"')
        const h = sha(last.seq + 1, last.at, row, body)
        s.sql(
          `INSERT INTO ${s.records} (seq, at, type, subject, target, outcome, prev_hash, hash, body) VALUES (${last.seq + 1}, '${last.at}', 'admin', 'mallory', NULL, 'ok', '${row}', '${h}', ${quote(body)});`,
        )
      },
      /^FAIL {2}record 4: its hash is an unkeyed SHA-256, not the audit key’s MAC.*\(forged\)/m,
    ],
    [
      'indexed column edited',
      () => s.sql(`UPDATE ${s.records} SET subject = 'alice' WHERE subject = 'olga' AND seq = 2;`),
      /^FAIL {2}record 2: its indexed column subject is "alice" but its body says "olga"/m,
    ],
  ]
}

async function proveTampering(
  s: Store,
  config: string,
  published: string,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  for (let i = 0; i < 3; i++) {
    const r = await barbican(['pins', 'baseline', '--config', config, '--as', 'olga'], env)
    assert.equal(r.code, 0, r.stdout)
  }
  const verify = () =>
    barbican(['audit', 'verify', '--config', config, '--checkpoint', published], env)
  const untouched = await verify()
  assert.equal(untouched.code, 0, untouched.stdout)
  assert.match(untouched.stdout, /3 published checkpoint\(s\) .* match the store/)
  s.save()
  for (const [what, tamper, message] of tamperCases(s)) {
    tamper()
    const r = await verify()
    s.restore()
    assert.equal(r.code, 1, `${what}: ${r.stdout}`)
    assert.match(r.stdout, message, what)
  }
  const again = await verify()
  assert.equal(again.code, 0, again.stdout)
}

test('sqlite: delete, rewrite, reorder, append and index edits fail verify --checkpoint', async () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-audit-tamper-')))
  const config = join(dir, 'barbican.yaml')
  const published = join(dir, 'published', 'checkpoints.jsonl')
  writeFileSync(config, `${UPSTREAMS}audit:\n  checkpoints:\n    publish: ${published}\n`)
  const db = join(dir, '.barbican', 'audit.db')
  const store: Store = {
    records: 'audit_records',
    checkpoints: 'audit_checkpoints',
    sql: (statements) => execFileSync('sqlite3', [db, statements], { encoding: 'utf8' }),
    save: () => copyFileSync(db, `${db}.saved`),
    restore: () => copyFileSync(`${db}.saved`, db),
  }
  await proveTampering(store, config, published, {})
})

test('postgres: delete, rewrite, reorder, append and index edits fail verify --checkpoint', async () => {
  const url = await freshPostgresUrl()
  const schema = new URL(url).searchParams.get('options')!.replace('-c search_path=', '')
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-audit-tamper-pg-')))
  const config = join(dir, 'barbican.yaml')
  const published = join(dir, 'checkpoints.jsonl')
  writeFileSync(config, UPSTREAMS)
  const base = new URL(url)
  base.search = ''
  const psql = (statements: string) =>
    execFileSync(
      'psql',
      ['-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', base.toString(), '-c', statements],
      {
        encoding: 'utf8',
        env: { ...process.env, PGOPTIONS: `-c search_path=${schema}` },
      },
    )
  const saved = `${schema}_saved`
  const store: Store = {
    records: 'barbican_audit_records',
    checkpoints: 'barbican_audit_checkpoints',
    sql: psql,
    save: () =>
      psql(
        `CREATE TABLE ${saved}_r AS SELECT * FROM barbican_audit_records; CREATE TABLE ${saved}_c AS SELECT * FROM barbican_audit_checkpoints;`,
      ),
    restore: () =>
      psql(
        `BEGIN; DELETE FROM barbican_audit_records; INSERT INTO barbican_audit_records SELECT * FROM ${saved}_r; DELETE FROM barbican_audit_checkpoints; INSERT INTO barbican_audit_checkpoints SELECT * FROM ${saved}_c; COMMIT;`,
      ),
  }
  await proveTampering(store, config, published, {
    BARBICAN_POSTGRES_URL: url,
    BARBICAN_AUDIT_CHECKPOINTS_PUBLISH: published,
  })
})
