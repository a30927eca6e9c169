/**
 * The example configurations work as written (issue 29 point 8, issue 32): `barbican check`
 * passes on the README's example and on each local example of examples/, every folder they
 * serve granted to the server, none left out (this file and one examples-*.test.ts per example, split for time:
 * test/support/examples.ts); the README's example then serves its tools and its memory keeps
 * what it was told across a restart. Each runs from a copy in a temporary folder, so nothing is
 * written into the checkout. Only the folder the README says to create is created
 * (`mkdir -p /tmp/barbican-files`). The secured and tenants examples name remote servers and an
 * identity provider: src/config/examples.test.ts loads them.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { textOf } from '../support/content.ts'
import { checkPasses, readmeExample, serve, stop, workspaces } from '../support/examples.ts'

describe('the README example, as written', () => {
  const workspace = workspaces()
  checkPasses('the README')

  test("the README's example serves its tools, and memory keeps an entity across a restart", async () => {
    const dir = workspace({ 'barbican.yaml': readmeExample() })
    const entity = `example-${process.pid}`
    let server = await serve(dir)
    try {
      const client = new Client({ name: 'examples', version: '1.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url)))
      const { tools } = await client.listTools()
      const names = tools.map((t) => t.name)
      for (const tool of [
        'files__read_text_file',
        'files__list_directory',
        'memory__create_entities',
      ]) {
        assert.ok(names.includes(tool), `${tool} in ${names.join(', ')}`)
      }
      const listed = await client.callTool({
        name: 'files__list_directory',
        arguments: { path: '/tmp/barbican-files' },
      })
      assert.notEqual(listed.isError, true, textOf(listed))
      const created = await client.callTool({
        name: 'memory__create_entities',
        arguments: { entities: [{ name: entity, entityType: 'test', observations: ['saved'] }] },
      })
      assert.notEqual(created.isError, true, textOf(created))
      await client.close()
      await stop(server.child)
      server = await serve(dir)
      const again = new Client({ name: 'examples', version: '1.0.0' })
      await again.connect(new StreamableHTTPClientTransport(new URL(server.url)))
      const graph = await again.callTool({ name: 'memory__read_graph', arguments: {} })
      assert.match(textOf(graph), new RegExp(entity))
      await again.close()
    } finally {
      await stop(server.child)
    }
  })
})
