/** `barbican status` as a person reads it. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Overview } from '../gateway/overview.ts'
import { formatOverview } from './status.ts'

test('status names the MCP revision each upstream speaks', () => {
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
  const lines = formatOverview(overview, 'http://127.0.0.1:7300').split('\n')
  assert.ok(lines.includes('  memory  ready (stdio, MCP 2025-11-25), 0 restarts'), lines.join('\n'))
  assert.ok(lines.includes('  web     failed (streamable-http), 2 restarts'), lines.join('\n'))
})
