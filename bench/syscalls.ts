/**
 * `node bench/syscalls.ts [--calls N] [--concurrency C] [--only a,b] [--root DIR]`: the system
 * calls one `tools/call` costs the gateway process (every thread), in the configurations of
 * `npm run bench` — as users run it (`-default`) and stripped — counted by `strace -f -c -p`
 * attached for N calls at concurrency C, each worker on its own MCP session (issue 33: kernel
 * crossings are expensive on these machines, so they are counted, not timed). `--root` runs the
 * Barbican checkout in DIR instead (before/after a change).
 *
 * strace slows every syscall many times over: its counts are used, never its times. The upstream
 * and the load (sent from this process) are not counted.
 */
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import {
  checkEcho,
  type HttpSession,
  initializeSession,
  type Target,
  toolCall,
} from './mcp-http.ts'
import {
  ROOT,
  type Running,
  startBarbican,
  startBarbicanAsUsers,
  startDirect,
} from './processes.ts'
import { countSyscalls, totalCalls } from './strace.ts'

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '1600' },
    concurrency: { type: 'string', default: '16' },
    only: { type: 'string' },
    root: { type: 'string', default: ROOT },
  },
})
const CALLS = Number(values.calls)
const C = Number(values.concurrency)
const root = values.root

/** Each configuration: how to start it, and what else to stop with it. */
const CONFIGURATIONS: Record<string, () => Promise<Running>> = {
  'barbican-http-default': () => overHttp('barbican-http-default', startBarbicanAsUsers),
  'barbican-stdio-default': () =>
    startBarbicanAsUsers('barbican-stdio-default', { stdio: true }, [], root),
  'barbican-http': () => overHttp('barbican-http', startBarbican),
  'barbican-stdio': () => startBarbican('barbican-stdio', { stdio: true }, [], root),
}

async function overHttp(name: string, start: typeof startBarbican): Promise<Running> {
  const upstream = await startDirect(true)
  const gateway = await start(name, { url: upstream.target.url }, [], root)
  return {
    ...gateway,
    async stop() {
      await gateway.stop()
      await upstream.stop()
    },
  }
}

/** `n` calls over `sessions`, one worker per session, each call checked. */
async function calls(http: Pool, target: Target, sessions: HttpSession[], n: number) {
  let id = 0
  await Promise.all(
    sessions.map(async (session, w) => {
      for (let i = 0; i < n / sessions.length; i++) {
        const text = `w${w}-${i}`
        const me = ++id
        checkEcho(await toolCall(http, target, session, me, text), me, text)
      }
    }),
  )
}

const chosen = Object.keys(CONFIGURATIONS).filter(
  (name) => !values.only || values.only.split(',').includes(name),
)
console.log(
  `\nSystem calls per tools/call, gateway process (all threads), strace -f -c over ${CALLS} calls at c=${C}; checkout ${root}\n`,
)
console.log('| configuration | syscalls/call | of which (≥ 0.02 per call) |')
console.log('| --- | ---: | --- |')
for (const name of chosen) {
  const running = await CONFIGURATIONS[name]!()
  const http = new Pool(new URL(running.target.url).origin, { connections: C })
  try {
    const sessions = await Promise.all(
      Array.from({ length: C }, () => initializeSession(http, running.target)),
    )
    // Warm: the JIT, the pools, the first audit batch.
    await calls(http, running.target, sessions, Math.min(CALLS, 800))
    const counts = await countSyscalls(running.pid, () =>
      calls(http, running.target, sessions, CALLS),
    )
    const kinds = Object.entries(counts)
      .filter(([, n]) => n / CALLS >= 0.02)
      .sort((a, b) => b[1] - a[1])
      .map(([kind, n]) => `${kind} ${(n / CALLS).toFixed(2)}`)
      .join(', ')
    console.log(`| ${name} | ${(totalCalls(counts) / CALLS).toFixed(2)} | ${kinds} |`)
  } finally {
    await http.close()
    await running.stop()
  }
}
