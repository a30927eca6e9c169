/**
 * `npm run bench:code-tokens`: what a model reads to do one multi-step task — read three files
 * with server-filesystem and write a summary of them — with the catalogue as direct tools, and
 * with code mode's one `run_code` tool. Both runs go through a real Barbican and an SDK client;
 * the transcript of each is what a tool-calling model sees: the tool definitions, the task, its
 * own tool calls and their results. Tokens are counted with gpt-tokenizer, encoding o200k_base.
 *
 * Two figures per mode: the tokens of the final transcript (the context the model ends with),
 * and the input tokens summed over its turns (each turn reads the whole transcript so far; the
 * direct run takes three turns: the reads, the write, the answer; code mode two).
 */
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'
import { startServer } from '../src/app/server.ts'
import { parseConfigText } from '../src/config/load.ts'
import { silentLogger } from '../src/telemetry/log.ts'
import { grantTo } from '../test/support/sandbox.ts'

const root = fileURLToPath(new URL('../', import.meta.url))
const filesystem = join(root, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-tokens-')))
const NAMES = ['alpha.txt', 'beta.txt', 'gamma.txt']
const body = (word: string) =>
  `${word} is one of three notes.\n${`Line about ${word}, with a few words of detail.\n`.repeat(20)}`
for (const name of NAMES) writeFileSync(join(dir, name), body(name.split('.')[0]!))
// The server runs confined: as root, under its own uid, which must own the folder it writes.
grantTo('files', dir)
const TASK = `Read ${NAMES.map((n) => join(dir, n)).join(', ')} and write ${join(dir, 'summary.txt')} with the first line of each.`

/** One piece of a transcript: counted as the JSON a model API would carry. */
type Piece = unknown

const tokens = (pieces: readonly Piece[]) =>
  pieces.reduce<number>((n, p) => n + countTokens(typeof p === 'string' ? p : JSON.stringify(p)), 0)

async function gateway(mode: 'all' | 'code') {
  const config = {
    listen: '127.0.0.1:0',
    upstreams: { files: { command: process.execPath, args: [filesystem, dir] } },
    servers: { default: { tools: { mode } } },
    audit: { enabled: false },
  }
  const server = await startServer(
    parseConfigText(JSON.stringify(config), { json: true }).config,
    silentLogger,
  )
  const client = new Client({ name: 'tokens', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  const { tools } = await client.listTools()
  // What a host puts in the prompt for each tool.
  const definitions = tools.map((t) => ({
    name: t.name,
    description: t.description,
    input_schema: t.inputSchema,
  }))
  return {
    definitions,
    call: async (name: string, args: Record<string, unknown>) => {
      const result = await client.callTool({ name, arguments: args })
      if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`)
      return { call: { name, arguments: args }, result: result.content }
    },
    stop: async () => {
      await client.close()
      await server.stop()
    },
  }
}

async function direct() {
  const g = await gateway('all')
  try {
    const turn1 = [g.definitions, TASK]
    const reads = await Promise.all(
      NAMES.map((n) => g.call('read_text_file', { path: join(dir, n) })),
    )
    const turn2 = [...turn1, ...reads.flatMap((r) => [r.call, r.result])]
    const summary = NAMES.map((n) => `${n}: ${body(n.split('.')[0]!).split('\n')[0]}`).join('\n')
    const write = await g.call('write_file', { path: join(dir, 'summary.txt'), content: summary })
    const turn3 = [...turn2, write.call, write.result]
    return { turns: [turn1, turn2, turn3], tools: g.definitions.length }
  } finally {
    await g.stop()
  }
}

async function code() {
  const g = await gateway('code')
  try {
    const turn1 = [g.definitions, TASK]
    const program = `
const names = ${JSON.stringify(NAMES)}
const texts = await Promise.all(names.map((n) => files.read_text_file({ path: '${dir}/' + n })))
const lines = names.map((n, i) => n + ': ' + texts[i].content.split('\\n')[0])
await files.write_file({ path: '${dir}/summary.txt', content: lines.join('\\n') })
return lines`
    const run = await g.call('run_code', { code: program })
    const turn2 = [...turn1, run.call, run.result]
    return { turns: [turn1, turn2], tools: g.definitions.length }
  } finally {
    await g.stop()
  }
}

const report = (label: string, r: { turns: Piece[][]; tools: number }) => {
  const final = tokens(r.turns.at(-1)!)
  const input = r.turns.reduce((n, t) => n + tokens(t), 0)
  const definitions = tokens([r.turns[0]![0]])
  return { label, tools: r.tools, definitions, final, input, turns: r.turns.length }
}

const rows = [report('direct tool calls', await direct()), report('code mode', await code())]
const summary = readFileSync(join(dir, 'summary.txt'), 'utf8')
if (summary.split('\n').length !== 3) throw new Error(`the summary is wrong: ${summary}`)
console.log(
  '| mode | tools listed | tool definitions | final transcript | input over all turns | turns |',
)
console.log('| --- | ---: | ---: | ---: | ---: | ---: |')
for (const r of rows) {
  console.log(
    `| ${r.label} | ${r.tools} | ${r.definitions} | ${r.final} | ${r.input} | ${r.turns} |`,
  )
}
const [d, c] = rows as [(typeof rows)[0], (typeof rows)[0]]
console.log(
  `\ncode mode / direct: final transcript ${(c.final / d.final).toFixed(2)}, input over all turns ${(c.input / d.input).toFixed(2)}`,
)
