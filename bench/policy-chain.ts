/**
 * `node bench/policy-chain.ts`: the gateway CPU per call of the empty policy chain (issue 33's
 * budget: ≤ 5 µs), as the default configuration has it when no policy is configured: the live
 * generation taken, the composed chain looked up, the call counted in and out of its generation
 * (src/policies/live-policies.ts), against calling the relay directly. In-process, many
 * iterations, a relay that answers at once: the difference is the chain's own cost.
 *
 * Options: --calls N (default 500000), --rounds N (default 5). Prints µs per call, medians.
 */
import { parseArgs } from 'node:util'
import { LiveChain, LivePolicies } from '../src/policies/live-policies.ts'
import type { Call, Next, Reply } from '../src/policies/policy.ts'
import { callOf } from '../test/support/calls.ts'

const REPLY: Reply = { kind: 'result', result: {} } as unknown as Reply
const relay: Next = () => Promise.resolve(REPLY)

const CALL: Call = callOf('tools/call', { name: 'echo', arguments: {} })

async function timed(calls: number, run: (call: Call) => Promise<Reply>): Promise<number> {
  const start = process.cpuUsage()
  for (let i = 0; i < calls; i++) await run(CALL)
  const used = process.cpuUsage(start)
  return (used.user + used.system) / calls
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** µs per call: the relay alone, through the empty chain, and the difference (medians). */
export async function emptyChainCost(
  calls: number,
  rounds: number,
): Promise<{ directUs: number; chainUs: number; chainOverDirectUs: number }> {
  const chain = new LiveChain(new LivePolicies([]), relay)
  const run = (call: Call) => chain.run(call)
  await timed(calls, relay)
  await timed(calls, run)
  const direct: number[] = []
  const through: number[] = []
  const over: number[] = []
  for (let r = 0; r < rounds; r++) {
    const d = await timed(calls, relay)
    const c = await timed(calls, run)
    direct.push(d)
    through.push(c)
    over.push(c - d)
  }
  return { directUs: median(direct), chainUs: median(through), chainOverDirectUs: median(over) }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      calls: { type: 'string', default: '500000' },
      rounds: { type: 'string', default: '5' },
    },
  })
  const result = await emptyChainCost(Number(values.calls), Number(values.rounds))
  process.stdout.write(
    `empty policy chain: ${result.chainOverDirectUs.toFixed(3)} µs/call over the relay alone ` +
      `(relay ${result.directUs.toFixed(3)}, through the chain ${result.chainUs.toFixed(3)}; medians)\n`,
  )
}
