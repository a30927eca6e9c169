/**
 * The console's overview page as HTML, from an overview object: what a user reads in each
 * column. The browser test (test/e2e/admin-console.test.ts) drives the same page on a gateway.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { Overview } from '../gateway/overview.ts'
import { overviewPage } from './pages.ts'

const overview: Overview = {
  version: '0.1.0',
  config: '/srv/barbican.yaml (native)',
  upstreams: [
    {
      name: 'memory',
      state: 'ready',
      transport: 'stdio',
      era: 'legacy',
      protocolVersion: '2025-11-25',
      restarts: 0,
    },
    { name: 'web', state: 'failed', transport: 'streamable-http', restarts: 2 },
  ],
  servers: [],
  sessions: 0,
}

/** The cells of the row whose first cell is `name`, as text. */
function row(html: string, name: string): string[] {
  const rows = html.match(/<tr>.*?<\/tr>/g) ?? []
  const found = rows.find((r) => r.startsWith(`<tr><td>${name}</td>`))
  assert.ok(found, `no row for ${name}`)
  return [...found.matchAll(/<t[dh][^>]*>(.*?)<\/t[dh]>/g)].map((m) =>
    (m[1] ?? '').replace(/<[^>]+>/g, ''),
  )
}

describe('the overview page', () => {
  test('names the MCP revision an upstream speaks, not the era', () => {
    const html = overviewPage({ path: '/admin', title: 'Overview', csrf: 'x' }, overview, new Map())
    assert.match(html, /<th[^>]*>MCP revision<\/th>/)
    assert.doesNotMatch(html, />Era</)
    assert.deepEqual(row(html, 'memory').slice(0, 4), ['memory', 'ready', '2025-11-25', 'stdio'])
    // Not connected yet: no revision to show.
    assert.deepEqual(row(html, 'web').slice(0, 3), ['web', 'failed', '—'])
  })
})
