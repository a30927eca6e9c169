/**
 * `node bench/amplifiers.ts`: what one `search_tools` call can cost, and what twenty of them do
 * to another client's request (issue 31 point 3, ADR 105). The catalogue is
 * bench/search/catalogue.json (real servers' tools) repeated under new server names up to
 * 3,000 tools; the query is 1,000 characters of tool vocabulary, as a model might send.
 *
 * Two figures per mode:
 * - CPU per call: process CPU time of one search on the main thread, median of `--calls`;
 * - ping under load: a server process answers `POST /search` (one search) and `GET /ping`
 *   (nothing); this process sends 20 searches at once, then a ping 5 ms later, and reports the
 *   ping's round trip, median of `--rounds`.
 *
 * Modes: `unbounded` (ToolIndex.search: the whole query, synchronously, as search_tools ran
 * before ADR 105) and `bounded` (ToolIndex.searchBounded with the default limits).
 *
 *   node bench/amplifiers.ts [--only unbounded|bounded] [--calls 20] [--rounds 5] [--json]
 */
import { fork } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { DEFAULT_LIMITS } from '../src/config/defaults.ts'
import { type ServerText, ToolIndex } from '../src/exposure/tool-search.ts'
import type { JsonObject } from '../src/protocol/jsonrpc.ts'

const MODES = ['unbounded', 'bounded'] as const
type Mode = (typeof MODES)[number]
const TOOLS = 3000
const IN_FLIGHT = 20

const BOUNDS = {
  maxTerms: DEFAULT_LIMITS.searchMaxTerms,
  maxExpansions: DEFAULT_LIMITS.searchMaxExpansions,
  budgetMs: DEFAULT_LIMITS.searchBudgetMs,
}

interface Catalogue {
  servers: { name: string; instructions?: string; tools: JsonObject[] }[]
}

/** 3,000 tools: the benchmark catalogue, copied under new server names until there are enough. */
function catalogue(): { tools: JsonObject[]; serverOf: (tool: JsonObject) => ServerText } {
  const file = fileURLToPath(new URL('./search/catalogue.json', import.meta.url))
  const { servers } = JSON.parse(readFileSync(file, 'utf8')) as Catalogue
  const tools: JsonObject[] = []
  const owner = new Map<JsonObject, ServerText>()
  for (let copy = 0; tools.length < TOOLS; copy++) {
    for (const s of servers) {
      for (const t of s.tools) {
        if (tools.length >= TOOLS) break
        const tool = { ...t, name: `${s.name}${copy}__${String(t.name)}` }
        tools.push(tool)
        owner.set(tool, { name: `${s.name}${copy}`, text: s.instructions ?? '' })
      }
    }
  }
  return { tools, serverOf: (tool) => owner.get(tool) ?? { name: '', text: '' } }
}

/** 1,000 characters of words tools use, some misspelt (so fuzzy matching works for them). */
function longQuery(): string {
  const vocabulary = (
    'create read update delete file issue pull request repository branch commit search query ' +
    'list get set write send message channel user team project database table row column index'
  ).split(' ')
  let query = ''
  for (let i = 0; query.length < 1000; i++) {
    query += `${vocabulary[(i * 7) % vocabulary.length]}${i % 3 === 0 ? '' : 'x'} `
  }
  return query.slice(0, 1000)
}

function search(index: ToolIndex, mode: Mode, query: string): Promise<unknown> {
  return mode === 'unbounded'
    ? Promise.resolve(index.search(query, 8))
    : index.searchBounded(query, 8, BOUNDS)
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function cpuPerCall(index: ToolIndex, mode: Mode, calls: number): Promise<number> {
  const query = longQuery()
  await search(index, mode, query)
  const samples: number[] = []
  for (let i = 0; i < calls; i++) {
    const before = process.cpuUsage()
    await search(index, mode, query)
    const used = process.cpuUsage(before)
    samples.push((used.user + used.system) / 1000)
  }
  return median(samples)
}

/** The server side: one index, answering searches and pings until killed. */
async function serve(mode: Mode): Promise<void> {
  const { tools, serverOf } = catalogue()
  const index = new ToolIndex(tools, serverOf)
  const query = longQuery()
  const server = createServer((req, res) => {
    if (req.url === '/ping') {
      res.end('pong')
      return
    }
    search(index, mode, query).then(
      () => res.end('ok'),
      () => res.end('error'),
    )
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    process.send?.({ port: (server.address() as AddressInfo).port })
  })
}

async function pingUnderLoad(mode: Mode, rounds: number): Promise<{ idle: number; busy: number }> {
  const child = fork(fileURLToPath(import.meta.url), ['--serve', mode], { stdio: 'inherit' })
  try {
    const port = await new Promise<number>((resolve) =>
      child.once('message', (m) => resolve((m as { port: number }).port)),
    )
    const url = `http://127.0.0.1:${port}`
    const ping = async () => {
      const start = performance.now()
      await (await fetch(`${url}/ping`)).text()
      return performance.now() - start
    }
    await (await fetch(`${url}/search`, { method: 'POST' })).text()
    const idle: number[] = []
    const busy: number[] = []
    for (let r = 0; r < rounds; r++) {
      idle.push(await ping())
      const searches = Array.from({ length: IN_FLIGHT }, () =>
        fetch(`${url}/search`, { method: 'POST' }).then((res) => res.text()),
      )
      await new Promise((resolve) => setTimeout(resolve, 5))
      busy.push(await ping())
      await Promise.all(searches)
    }
    return { idle: median(idle), busy: median(busy) }
  } finally {
    child.kill()
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: 'string' },
      only: { type: 'string' },
      calls: { type: 'string', default: '20' },
      rounds: { type: 'string', default: '5' },
      json: { type: 'boolean', default: false },
    },
  })
  if (values.serve !== undefined) return await serve(values.serve as Mode)
  const modes = values.only ? (values.only.split(',') as Mode[]) : [...MODES]
  const { tools, serverOf } = catalogue()
  const index = new ToolIndex(tools, serverOf)
  const results: Record<string, { cpuMsPerCall: number; pingIdleMs: number; pingBusyMs: number }> =
    {}
  for (const mode of modes) {
    const cpu = await cpuPerCall(index, mode, Number(values.calls))
    const ping = await pingUnderLoad(mode, Number(values.rounds))
    results[mode] = { cpuMsPerCall: cpu, pingIdleMs: ping.idle, pingBusyMs: ping.busy }
  }
  if (values.json) {
    console.log(JSON.stringify({ tools: TOOLS, inFlight: IN_FLIGHT, bounds: BOUNDS, results }))
    return
  }
  console.log(`${TOOLS} tools, a 1,000-character query; ping with ${IN_FLIGHT} searches in flight`)
  for (const [mode, r] of Object.entries(results)) {
    console.log(
      `${mode.padEnd(10)} CPU ${r.cpuMsPerCall.toFixed(1)} ms/call · ping idle ${r.pingIdleMs.toFixed(1)} ms, busy ${r.pingBusyMs.toFixed(1)} ms`,
    )
  }
}

await main()
