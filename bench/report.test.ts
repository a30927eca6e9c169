import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  differences,
  type Report,
  renderMarkdown,
  type Sample,
  summarise,
  verdicts,
} from './report.ts'

function sample(rps: number, p50Ms: number, cpuUsPerCall = 50, kernelUsPerCall = 5): Sample {
  return {
    rps,
    p50Ms,
    p99Ms: p50Ms * 2,
    cpuUsPerCall,
    kernelUsPerCall,
    rssLoadMb: 50,
    requests: rps,
    errors: 0,
  }
}

test('ratios are taken within each round, then the median over rounds is reported', () => {
  // The machine slows down in round 2 for everyone: per-round ratios stay at 0.9.
  const summaries = summarise(
    {
      'direct-stateful': { 16: [sample(1000, 1), sample(500, 2), sample(1000, 1)] },
      'barbican-http': { 16: [sample(900, 1.1), sample(450, 2.1), sample(900, 1.1)] },
      'mcp-proxy': { 16: [sample(300, 3), sample(150, 6), sample(300, 3)] },
    },
    'direct-stateful',
  )
  const barbican = summaries.find((s) => s.configuration === 'barbican-http')!
  assert.equal(barbican.rounds, 3)
  assert.equal(barbican.rps, 900)
  assert.ok(Math.abs(barbican.ratio - 0.9) < 1e-9)
  assert.ok(Math.abs(barbican.addedP50Ms - 0.1) < 1e-9)
  assert.ok(Math.abs(barbican.vsBestPeer - 3) < 1e-9)
})

test('a missed target is reported with how far it is from its limit', () => {
  const report: Report = {
    startedAt: '2026-01-01T00:00:00.000Z',
    node: 'v22',
    cpus: 2,
    options: { rounds: 1, durationMs: 1, warmupMs: 1, concurrencies: [16], quick: true },
    configurations: [],
    idleRssMb: { 'barbican-stdio': 90 },
    throughput: summarise(
      {
        'direct-stateful': { 16: [sample(1000, 1)] },
        'barbican-http': { 16: [sample(500, 1, 150)] },
      },
      'direct-stateful',
    ),
  }
  const all = verdicts(report)
  const ratio = all.find((v) => v.target.startsWith('Barbican → HTTP: throughput'))!
  assert.equal(ratio.met, false)
  assert.ok(Math.abs((ratio.missedByPercent ?? 0) - (100 * 0.35) / 0.85) < 1e-9)
  const rss = all.find((v) => v.target.startsWith('Barbican idle RSS ≤ 60 MB (→ stdio)'))!
  assert.equal(rss.met, false)
  assert.equal(rss.missedByPercent, 50)
  const unmeasured = all.find((v) => v.target.startsWith('Merged tools/list'))!
  assert.equal(unmeasured.met, undefined)
  assert.match(renderMarkdown(report), /\*\*no\*\* \(off by 41%\)/)
})

test('the backends’ added CPU is split into user and kernel, taken within each round', () => {
  // Round 2 is slow for both; within-round differences stay at +20 user, +10 kernel.
  const samples = {
    'barbican-stdio-2026': {
      16: [sample(1000, 1, 100, 20), sample(500, 2, 300, 60), sample(1000, 1, 110, 20)],
    },
    'barbican-stdio-2026+pg+redis': {
      16: [sample(800, 1, 130, 30), sample(400, 2, 330, 70), sample(900, 1, 140, 30)],
    },
  }
  const [d] = differences(samples, 'barbican-stdio-2026+pg+redis', 'barbican-stdio-2026')
  assert.ok(d)
  assert.equal(d.concurrency, 16)
  assert.equal(d.addedUserUs, 20)
  assert.equal(d.addedKernelUs, 10)
  assert.equal(d.addedCpuUs, 30)
  assert.equal(d.ratio, 0.8)
  assert.equal(d.baseUserUs, 90)
  const report: Report = {
    startedAt: '2026-01-01T00:00:00.000Z',
    node: 'v22',
    cpus: 2,
    options: { rounds: 3, durationMs: 1, warmupMs: 1, concurrencies: [16], quick: true },
    configurations: [],
    idleRssMb: {},
    throughput: summarise(samples, 'direct-stateful'),
    backends: [d],
  }
  const all = verdicts(report)
  assert.equal(all.find((v) => v.target.includes('≤ 30 µs more gateway CPU'))?.met, true)
  const ratio = all.find((v) => v.target.includes('≥ 0.9× embedded'))!
  assert.equal(ratio.met, false)
  assert.match(
    renderMarkdown(report),
    /\| 16 \| 90 \| 20 \| 110 \| 30 \| 20 \| 10 \| 30 \| 0\.80 \|/,
  )
})
