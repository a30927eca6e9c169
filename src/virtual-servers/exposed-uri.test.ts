import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { rules } from '../../test/support/plans.ts'
import { testUpstream } from '../../test/support/upstreams.ts'
import type { NamespaceMode } from '../catalog/names.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import type { Upstream } from '../upstreams/upstream.ts'
import { VirtualServer } from './virtual-server.ts'

/** An upstream `name` offering one listed resource, `demo://listed`. */
function upstream(name: string): Upstream {
  const sdk = new McpServer({ name, version: '1' })
  sdk.registerResource('listed', 'demo://listed', {}, async (uri) => ({
    contents: [{ uri: uri.href, text: name }],
  }))
  return testUpstream(name, () => {
    const [ours, theirs] = memoryPair()
    void sdk.connect(theirs as never)
    return ours
  })
}

describe('the URI a client reads an upstream resource by (resource links, tools-only)', () => {
  const cases: [NamespaceMode, string[], string, string][] = [
    // Several upstreams, prefixed: the listed exposed URI, or the namespaced form of any other.
    ['always', ['a', 'b'], 'a+demo://listed', 'a+demo://linked/1'],
    // Not prefixed (one upstream): the URI as the upstream gave it.
    ['never', ['a'], 'demo://listed', 'demo://linked/1'],
  ]
  for (const [mode, names, listed, unlisted] of cases) {
    test(`namespacing ${mode}, ${names.length} upstream(s)`, async () => {
      const members = names.map(upstream)
      const server = new VirtualServer('main', members, rules(mode), silentLogger)
      try {
        assert.equal(await server.exposedUri('a', 'demo://listed'), listed)
        assert.equal(await server.exposedUri('a', 'demo://linked/1'), unlisted)
        // Whatever it gives routes back to the same upstream and URI.
        const back = await server.resolveResource(unlisted)
        assert.equal(back.target.original, 'demo://linked/1')
        assert.equal(back.upstream.name, 'a')
      } finally {
        for (const m of members) await m.stop()
      }
    })
  }
})
