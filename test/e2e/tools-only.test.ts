/**
 * `adapt: tools-only`: an SDK client that uses nothing but tools (tools/list, tools/call) reaches
 * server-everything's resources, resource templates, resource links and prompts through
 * `list_resources`, `read_resource` and `get_prompt`, in both eras (SDK v1 on a 2025-11-25
 * session, SDK v2 pinned to 2026-07-28). The same permissions and audit apply as to the direct
 * methods: a caller refused a resource or a prompt directly is refused it through the tools too.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { ephemeralAuditKey } from '../../src/audit/audit-key.ts'
import { AuditLog } from '../../src/audit/audit-log.ts'
import { memoryAuditStore } from '../../src/audit/memory.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { LEGACY_ERA, type ToolClient, toolClientsByEra } from '../support/era-clients.ts'

type Json = Record<string, unknown>

const root = fileURLToPath(new URL('../../', import.meta.url))
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

/** What the tests need of either SDK's client. */

interface ToolResult {
  content: Json[]
  structuredContent?: Json
  isError?: boolean
}

const ERAS = toolClientsByEra('tools-only')

describe('adapt: tools-only over server-everything', () => {
  let server: RunningServer
  let audit: AuditLog
  const records: Json[] = []
  const alice = generateApiKey()
  const bob = generateApiKey()

  before(async () => {
    audit = new AuditLog({
      store: memoryAuditStore(),
      key: ephemeralAuditKey(),
      export: { write: (line) => records.push(JSON.parse(line) as Json) },
    })
    const config = {
      listen: '127.0.0.1:0',
      upstreams: { everything: { command: process.execPath, args: [everything, 'stdio'] } },
      servers: { default: { adapt: 'tools-only' } },
      auth: {
        apiKeys: {
          keys: [
            { id: 'a', hash: alice.hash, subject: 'alice' },
            { id: 'b', hash: bob.hash, subject: 'bob' },
          ],
        },
        permissions: [
          { subjects: ['alice'], servers: ['*'] },
          // Bob: every tool, one prompt, no resource at all.
          { subjects: ['bob'], servers: ['*'], tools: ['*'], prompts: ['simple-prompt'] },
        ],
      },
    }
    server = await startServer(
      parseConfigText(JSON.stringify(config), { json: true }).config,
      silentLogger,
      undefined,
      audit,
    )
  })

  after(async () => {
    await server?.stop()
    await audit?.close()
  })

  for (const [era, connect] of Object.entries(ERAS)) {
    describe(era, () => {
      let client: ToolClient
      const call = async (name: string, args: Json = {}) =>
        (await client.callTool({ name, arguments: args })) as ToolResult

      before(async () => {
        client = await connect(new URL(`${server.url}/mcp`), alice.key)
      })
      after(async () => {
        await client?.close()
      })

      test('lists the three tools beside the catalogue; get_prompt names the prompts', async () => {
        const { tools } = await client.listTools()
        const names = tools.map((t) => t.name)
        for (const name of ['echo', 'list_resources', 'read_resource', 'get_prompt']) {
          assert.ok(names.includes(name), `${name} missing from ${names.join(', ')}`)
        }
        const getPrompt = tools.find((t) => t.name === 'get_prompt')
        assert.match(getPrompt?.description ?? '', /args-prompt\(city, state\?\)/)
      })

      test('list_resources gives the resources and the templates', async () => {
        const listed = await call('list_resources')
        assert.notEqual(listed.isError, true, JSON.stringify(listed))
        const data = listed.structuredContent as {
          resources: { uri: string }[]
          resourceTemplates: { uriTemplate: string }[]
        }
        assert.ok(data.resources.some((r) => r.uri.startsWith('demo://resource/static/document/')))
        assert.ok(
          data.resourceTemplates.some(
            (t) => t.uriTemplate === 'demo://resource/dynamic/text/{resourceId}',
          ),
        )
        assert.deepEqual(JSON.parse(String(listed.content[0]?.text)), data)
      })

      test('read_resource reads a listed resource and a filled-in template', async () => {
        const listed = await call('list_resources')
        const uri = (listed.structuredContent as { resources: { uri: string }[] }).resources[0]!.uri
        const read = await call('read_resource', { uri })
        const block = read.content[0] as { type: string; resource: { uri: string; text?: string } }
        assert.equal(block.type, 'resource')
        assert.equal(block.resource.uri, uri)
        assert.ok((block.resource.text ?? '').length > 0)
        const templated = await call('read_resource', { uri: 'demo://resource/dynamic/text/7' })
        const resource = (templated.content[0] as { resource: { text: string } }).resource
        assert.match(resource.text, /^Resource 7: This is a plaintext resource/)
      })

      test('the resource links of a tool result are readable through read_resource', async () => {
        const links = await call('get-resource-links', { count: 2 })
        const link = links.content.find((c) => c.type === 'resource_link') as { uri: string }
        assert.ok(link, JSON.stringify(links))
        const read = await call('read_resource', { uri: link.uri })
        assert.notEqual(read.isError, true, JSON.stringify(read))
        const block = read.content[0] as { resource: { uri: string } }
        assert.equal(block.resource.uri, link.uri)
      })

      test('get_prompt fills in a prompt with its arguments', async () => {
        const prompt = await call('get_prompt', {
          name: 'args-prompt',
          arguments: { city: 'Lyon', state: 'Rhône' },
        })
        assert.match(JSON.stringify(prompt.content), /\[user\] What's weather in Lyon, Rhône\?/)
      })

      test('an unknown resource and a bad argument are tool errors with the reason', async () => {
        const unknown = await call('read_resource', { uri: 'nowhere://at/all' })
        assert.equal(unknown.isError, true)
        assert.match(String(unknown.content[0]?.text), /Unknown resource|not found/i)
        await assert.rejects(
          client.callTool({ name: 'read_resource', arguments: { uri: 42 } as unknown as Json }),
          /uri/,
        )
      })
    })
  }

  test('policy: a caller refused resources and a prompt directly is refused them as tools, and audit records it', async () => {
    const client = await ERAS[LEGACY_ERA]!(new URL(`${server.url}/mcp`), bob.key)
    try {
      const call = async (name: string, args: Json = {}) =>
        (await client.callTool({ name, arguments: args })) as ToolResult
      const read = await call('read_resource', { uri: 'demo://resource/dynamic/text/1' })
      assert.equal(read.isError, true)
      assert.match(String(read.content[0]?.text), /bob may not use the resource/)
      const listed = await call('list_resources')
      assert.deepEqual((listed.structuredContent as { resources: unknown[] }).resources, [])
      const refused = await call('get_prompt', { name: 'args-prompt', arguments: { city: 'x' } })
      assert.equal(refused.isError, true)
      assert.match(String(refused.content[0]?.text), /bob may not use the prompt/)
      const allowed = await call('get_prompt', { name: 'simple-prompt' })
      assert.notEqual(allowed.isError, true, JSON.stringify(allowed))
    } finally {
      await client.close()
    }
    const bobs = records.filter((r) => r.subject === 'bob')
    const denied = bobs.find((r) => r.method === 'resources/read')
    assert.ok(denied, `no resources/read record for bob in ${JSON.stringify(bobs)}`)
    assert.notEqual(denied.outcome, 'ok')
    assert.ok(bobs.some((r) => r.method === 'prompts/get' && r.outcome === 'ok'))
  })
})
