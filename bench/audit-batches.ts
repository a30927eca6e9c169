/**
 * `node bench/audit-batches.ts [--batch N] [--batches N] [--rounds N] [--only sqlite|postgres]
 * [--callgrind]`:
 * what a group commit of N journalled records (default 256, the batched mode's commit size under
 * load: audit-log.ts COMMIT_AT) costs this process in each audit store, per record: the store's
 * `append` alone, with the records' chaining and hashing (the same for every store) measured
 * apart and subtracted. User and system CPU from `process.cpuUsage`, medians of the rounds,
 * stores alternating. PostgreSQL: a fresh schema on the local server (BARBICAN_TEST_POSTGRES_URL).
 * `--callgrind`: the script runs itself under `valgrind --tool=callgrind` and counts the main
 * thread's instructions per record instead (user space only, but exact): one round per store
 * after one of warm-up, the building counted apart and subtracted as above.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { ephemeralAuditKey } from '../src/audit/audit-key.ts'
import type { AuditStore, ChainHead } from '../src/audit/audit-store.ts'
import { postgresAuditStore } from '../src/audit/postgres.ts'
import { type AuditRecord, chainBody, searchableOfEvent } from '../src/audit/record.ts'
import { openSqliteAuditStore } from '../src/audit/sqlite.ts'
import { openPostgresPool } from '../src/store/postgres.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../test/support/backends.ts'

const { values } = parseArgs({
  options: {
    batch: { type: 'string', default: '256' },
    batches: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '5' },
    only: { type: 'string' },
    callgrind: { type: 'boolean', default: false },
  },
})
if (values.callgrind && process.env.AUDIT_BATCHES_UNDER_CALLGRIND === undefined) {
  // One process per store: each counts its own round after its own warm-up.
  const args = process.argv.slice(2).filter((a) => a !== '--callgrind')
  for (const only of values.only === undefined ? ['sqlite', 'postgres'] : [values.only]) {
    const out = mkdtempSync(join(tmpdir(), 'barbican-audit-batches-callgrind-'))
    const run = spawnSync(
      'valgrind',
      [
        '--tool=callgrind',
        '--instr-atstart=no',
        '--separate-threads=yes',
        `--callgrind-out-file=${join(out, 'callgrind.out.%p')}`,
        process.execPath,
        '--single-threaded-gc',
        fileURLToPath(import.meta.url),
        ...args,
        '--only',
        only,
        '--rounds',
        '1',
      ],
      {
        stdio: ['ignore', 'inherit', 'ignore'],
        env: { ...process.env, AUDIT_BATCHES_UNDER_CALLGRIND: out, NODE_NO_WARNINGS: '1' },
      },
    )
    rmSync(out, { recursive: true, force: true })
    if (run.status !== 0) process.exit(run.status ?? 1)
  }
  process.exit(0)
}
const callgrindDir = process.env.AUDIT_BATCHES_UNDER_CALLGRIND
let dumps = 0
/** Under callgrind: the main thread's instructions since the last call (a dump). */
const counted = (): number => {
  if (callgrindDir === undefined) return 0
  spawnSync('callgrind_control', ['-d', String(process.pid)])
  dumps++
  const main = readdirSync(callgrindDir).find((f) => f.endsWith(`.${dumps}-01`))
  if (main === undefined) throw new Error(`no callgrind dump ${dumps} in ${callgrindDir}`)
  const text = readFileSync(join(callgrindDir, main), 'utf8')
  return Number(/^(?:totals|summary):\s+(\d+)/m.exec(text)?.[1] ?? 0)
}
const BATCH = Number(values.batch)
const BATCHES = Number(values.batches)

/** A journal line like the gateway's for a 2026-07-28 echo call (policies/audit.ts). */
function line(i: number): { body: string; searchable: ReturnType<typeof searchableOfEvent> } {
  const event = {
    type: 'call',
    callId: `${(0x100000000000 + i).toString(16)}-1`,
    subject: 'anonymous',
    transport: 'streamable-http-stateless',
    server: 'default',
    upstream: 'echo',
    method: 'tools/call',
    target: 'echo',
    argsDigest: 'ce72c3fd0e2c9c15b739e57e3c4e87ed5228eef5b417d41b7a0a38292e9dc5f5',
    outcome: 'ok',
    latencyMs: 3.125,
    decision: 'none',
  }
  return { body: JSON.stringify(event), searchable: searchableOfEvent(event) }
}

const MAC = ephemeralAuditKey().macKey!
const lines = Array.from({ length: BATCH }, (_, i) => line(i))
let n = 0
const build = (head: ChainHead): AuditRecord[] => {
  const at = new Date().toISOString()
  const records: AuditRecord[] = []
  let previous = head
  for (const l of lines) {
    // A different body per record, as calls have (callId).
    const r = chainBody(MAC, previous, at, `${l.body.slice(0, -1)},"n":${n++}}`, l.searchable)
    records.push(r)
    previous = r
  }
  return records
}

const cpu = () => {
  const u = process.cpuUsage()
  return { user: u.user, system: u.system }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/**
 * µs of this process's CPU per record: appends of whole batches, minus building them (under
 * callgrind, `user` is instructions per record and `system` 0).
 */
async function round(store: AuditStore, count = false): Promise<{ user: number; system: number }> {
  let head = await store.head()
  if (count) spawnSync('callgrind_control', ['-i', 'on', String(process.pid)])
  const c0 = cpu()
  for (let b = 0; b < BATCHES; b++) build(head)
  const c1 = cpu()
  const building = count ? counted() : 0
  for (let b = 0; b < BATCHES; b++) {
    const added = await store.append(build)
    head = added.at(-1)!
  }
  const c2 = cpu()
  const appending = count ? counted() : 0
  if (count) spawnSync('callgrind_control', ['-i', 'off', String(process.pid)])
  const records = BATCH * BATCHES
  if (count) return { user: (appending - building) / records, system: 0 }
  return {
    user: (c2.user - c1.user - (c1.user - c0.user)) / records,
    system: (c2.system - c1.system - (c1.system - c0.system)) / records,
  }
}

const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-batches-'))
const pool = await openPostgresPool(await freshPostgresUrl())
try {
  const stores: Record<string, AuditStore> = {}
  if (values.only !== 'postgres') stores.sqlite = await openSqliteAuditStore(join(dir, 'audit.db'))
  if (values.only !== 'sqlite') stores.postgres = postgresAuditStore(pool, false)
  const results: Record<string, { user: number[]; system: number[] }> = {}
  for (const label of Object.keys(stores)) {
    await round(stores[label]!) // warm-up
    results[label] = { user: [], system: [] }
  }
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const [label, store] of Object.entries(stores)) {
      const { user, system } = await round(store, callgrindDir !== undefined)
      results[label]!.user.push(user)
      results[label]!.system.push(system)
    }
  }
  for (const [label, { user, system }] of Object.entries(results)) {
    if (callgrindDir !== undefined) {
      console.log(
        `${label}: batches of ${BATCH}, main-thread instructions per record: ${Math.round(user[0]!)}`,
      )
      continue
    }
    console.log(
      `${label}: batches of ${BATCH}, µs CPU per record (median of ${user.length}): user ` +
        `${median(user).toFixed(2)}, system ${median(system).toFixed(2)} ` +
        `(user per round ${user.map((u) => u.toFixed(2)).join(' ')})`,
    )
  }
  for (const store of Object.values(stores)) await store.close()
} finally {
  await pool.end()
  await dropPostgresSchemas()
  rmSync(dir, { recursive: true, force: true })
}
