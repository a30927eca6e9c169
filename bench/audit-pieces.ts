/**
 * `node bench/audit-pieces.ts PIECE CALLS`: runs CALLS `tools/call`s (after 20,000 of warm-up)
 * through one piece of what the default configuration adds per call, in-process, so that
 * callgrind (`--instr-atstart=yes`) counted at two CALLS gives that piece's instructions per
 * call by difference (`valgrind --tool=callgrind node bench/audit-pieces.ts line 2000`, then with
 * 1000, and subtract). Pieces: `line` (the call line, JSON, batched),
 * `event` (the audit policy building its event and the argument digest, sink resolving at once),
 * `journal` (AuditLog.record in batched mode, its journal write and the window's commit to
 * SQLite with the chain's HMAC), `all` (the three), `none` (the loop alone).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ephemeralAuditKey } from '../src/audit/audit-key.ts'
import { AuditLog } from '../src/audit/audit-log.ts'
import type { AuditEvent } from '../src/audit/record.ts'
import { openSqliteAuditStore } from '../src/audit/sqlite.ts'
import { auditPolicy } from '../src/policies/audit.ts'
import type { Reply } from '../src/policies/policy.ts'
import { callOutcome, logCall, requestFields, traceIdOf } from '../src/session/call-line.ts'
import { LineBatch } from '../src/telemetry/line-batch.ts'
import { jsonLogger } from '../src/telemetry/log.ts'
import { callOf } from '../test/support/calls.ts'

const piece = process.argv[2] ?? 'all'
const calls = Number(process.argv[3] ?? 1000)
const C = 16

const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-pieces-'))
const store = await openSqliteAuditStore(join(dir, 'audit.db'))
const audit = new AuditLog({
  store,
  key: ephemeralAuditKey(),
  batched: { journal: join(dir, 'audit.db-batch'), windowMs: 200 },
})
let sink = ''
const batch = new LineBatch({
  write: (text) => {
    sink = text
  },
})
const root = jsonLogger({ write: (line) => batch.add(line) })
const line = piece === 'line' || piece === 'all'
const event = piece === 'event' || piece === 'all'
const journal = piece === 'journal' || piece === 'all'
const policy = auditPolicy({
  sink: journal ? audit : { record: async (_e: AuditEvent) => {} },
})

let n = 0
const reply: Reply = {
  kind: 'result',
  id: 1,
  resultType: 'complete',
  result: { content: [{ type: 'text', text: 'Echo: hello' }] },
}
async function one(): Promise<void> {
  n++
  const params = { name: 'echo', arguments: { message: `hello ${n}` } }
  const log = root.child(requestFields(n, traceIdOf(undefined, params)))
  const startedAt = performance.now()
  const call = callOf('tools/call', params, {
    id: `29a0be665f3c-${n}`,
    route: { kind: 'unicast', upstream: 'echo', original: 'echo' },
    decisions: [],
  })
  if (event || journal) await policy.handle(call, async () => reply)
  if (line) {
    logCall(log, {
      method: 'tools/call',
      params,
      upstream: 'echo',
      outcome: callOutcome(reply),
      startedAt,
    })
  }
}

async function run(total: number): Promise<void> {
  let done = 0
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (done < total) {
        done++
        await one()
      }
    }),
  )
}
await run(20_000)
await audit.flush()
await run(calls)
await audit.flush()
await audit.close()
rmSync(dir, { recursive: true, force: true })
if (sink.length < 0) console.log(sink)
