/**
 * Summarises a V8 `.cpuprofile` (from `npm run bench -- --profile`): self time by function and by
 * file, so the top costs of the hot path can be read without a browser.
 *
 * Usage: node bench/profile-summary.ts FILE.cpuprofile [top] [skipMs]
 * (`skipMs`, default 2000, leaves out start-up: module loading and type stripping.)
 */
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'

interface ProfileNode {
  readonly id: number
  readonly callFrame: {
    readonly functionName: string
    readonly url: string
    readonly lineNumber: number
  }
  readonly hitCount?: number
}

interface Profile {
  readonly nodes: readonly ProfileNode[]
  readonly samples: readonly number[]
  readonly timeDeltas: readonly number[]
}

const ROOT = fileURLToPath(new URL('..', import.meta.url))

function where(url: string): string {
  if (url === '') return '(native)'
  const path = url.startsWith('file://') ? fileURLToPath(url) : url
  return path.startsWith(ROOT) ? relative(ROOT, path) : path
}

/** Busy self time in microseconds by function and by file, largest first. */
export function summarise(
  profile: Profile,
  skipMs = 0,
): {
  total: number
  byFunction: [string, number][]
  byFile: [string, number][]
} {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const fn = new Map<string, number>()
  const file = new Map<string, number>()
  let total = 0
  let elapsed = 0
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)
    const dt = profile.timeDeltas[i] ?? 0
    elapsed += dt
    if (!node || elapsed < skipMs * 1000) return
    const f = node.callFrame
    // Idle time is the event loop waiting: not a cost.
    if (f.functionName === '(idle)') return
    total += dt
    const w = where(f.url)
    const key = `${f.functionName || '(anonymous)'} ${w}:${f.lineNumber + 1}`
    fn.set(key, (fn.get(key) ?? 0) + dt)
    const fileKey = w.startsWith('node_modules/') ? w.split('/').slice(0, 2).join('/') : w
    file.set(fileKey, (file.get(fileKey) ?? 0) + dt)
  })
  const sort = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1])
  return { total, byFunction: sort(fn), byFile: sort(file) }
}

if (import.meta.main) {
  const [path, topArg, skipArg] = process.argv.slice(2)
  if (!path) {
    process.stderr.write('usage: profile-summary.ts FILE.cpuprofile [top]\n')
    process.exit(2)
  }
  const top = Number(topArg ?? 30)
  const { total, byFunction, byFile } = summarise(
    JSON.parse(readFileSync(path, 'utf8')),
    Number(skipArg ?? 2000),
  )
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`
  process.stdout.write(`busy (not idle) ${(total / 1000).toFixed(0)} ms\n\nself time by file:\n`)
  const lines = [
    ...byFile.slice(0, top).map(([k, v]) => `${pct(v)}  ${k}`),
    '',
    'self time by function:',
  ]
  lines.push(...byFunction.slice(0, top).map(([k, v]) => `${pct(v)}  ${k}`))
  process.stdout.write(`${lines.join('\n')}\n`)
}
