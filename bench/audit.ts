/**
 * `node bench/audit.ts`: what the audit log costs per call, on the embedded SQLite backend with
 * every commit fsynced. Calls go through the real `audit` policy (event, argument digest,
 * chain hash, group commit) to a relay that answers at once, so the figures are audit's alone.
 *
 * For each concurrency (callers each awaiting their reply before the next call, as clients of
 * the gateway do) it prints records/s, wall µs per record, CPU µs per record (the gateway's
 * share: it runs on the event loop) and records per transaction. Compare records/s at c=64
 * with the gateway's own tools/call rate in docs/performance.md.
 *
 * Options: --duration MS (per concurrency, default 2000), --concurrency 1,16,64.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { ephemeralAuditKey } from '../src/audit/audit-key.ts'
import { AuditLog } from '../src/audit/audit-log.ts'
import { openSqliteAuditStore } from '../src/audit/sqlite.ts'
import { ANONYMOUS } from '../src/auth/identity.ts'
import { auditPolicy } from '../src/policies/audit.ts'
import { compose } from '../src/policies/chain.ts'
import type { Call, Reply } from '../src/policies/policy.ts'
import type { Request } from '../src/protocol/model.ts'
import { silentLogger } from '../src/telemetry/log.ts'

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '1,16,64' },
  },
})
const durationMs = Number(values.duration)
const levels = values.concurrency.split(',').map(Number)

const dir = mkdtempSync(join(tmpdir(), 'barbican-bench-audit-'))
const store = await openSqliteAuditStore(join(dir, 'audit.db'))
let transactions = 0
const counted = {
  ...store,
  append: (build: Parameters<typeof store.append>[0]) => {
    transactions++
    return store.append(build)
  },
}
const log = new AuditLog({ store: counted, key: ephemeralAuditKey() })
const chain = compose(
  [auditPolicy({ sink: log })],
  async (call): Promise<Reply> => ({
    kind: 'result',
    id: call.request.id,
    resultType: 'complete',
    result: { content: [{ type: 'text', text: 'Echo: hello' }] },
  }),
)

let n = 0
function call(): Call {
  n++
  return {
    id: `bench-${n}`,
    request: {
      kind: 'request',
      id: n,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: `hello ${n}` } },
    } as Request,
    identity: ANONYMOUS,
    server: 'default',
    transport: 'streamable-http',
    route: { kind: 'unicast', upstream: 'everything', original: 'echo' },
    signal: new AbortController().signal,
    log: silentLogger,
    decisions: [],
  }
}

console.log('| c | records/s | wall µs/record | CPU µs/record | records/transaction |')
console.log('| ---: | ---: | ---: | ---: | ---: |')
for (const c of levels) {
  let records = 0
  const txBefore = transactions
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  const until = started + durationMs
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (performance.now() < until) {
        await chain(call())
        records++
      }
    }),
  )
  const wallMs = performance.now() - started
  const cpu = process.cpuUsage(cpuBefore)
  const tx = transactions - txBefore
  console.log(
    `| ${c} | ${Math.round((records / wallMs) * 1000)} | ${((wallMs * 1000) / records).toFixed(1)} | ` +
      `${((cpu.user + cpu.system) / records).toFixed(1)} | ${(records / tx).toFixed(1)} |`,
  )
}
await log.close()
rmSync(dir, { recursive: true, force: true })
