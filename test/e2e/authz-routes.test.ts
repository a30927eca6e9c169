/**
 * Permissions on every route to an upstream, through the gateway over two real
 * server-everything upstreams `a` and `b`: a caller granted only `a__echo` reaches nothing of
 * `b` (prompts, resources, templates, completion, subscriptions, lists), while a caller granted
 * everything still does.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

const EVERYTHING = fileURLToPath(
  new URL(
    '../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
)

describe('permissions on every route to an upstream', () => {
  let server: RunningServer
  const mallory = generateApiKey()
  const admin = generateApiKey()
  const clients: Client[] = []
  let asMallory: Client
  let asAdmin: Client

  async function connect(key: string): Promise<Client> {
    const client = new Client({ name: 'authz', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}` } },
      }),
    )
    clients.push(client)
    return client
  }

  before(async () => {
    const everything = { command: process.execPath, args: [EVERYTHING, 'stdio'] }
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { a: everything, b: everything },
      auth: {
        apiKeys: {
          keys: [
            { id: 'm', hash: mallory.hash, subject: 'mallory' },
            { id: 'x', hash: admin.hash, subject: 'admin' },
          ],
        },
        permissions: [
          { subjects: ['mallory'], servers: ['*'], tools: ['a__echo'] },
          { subjects: ['admin'], servers: ['*'] },
        ],
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
    asMallory = await connect(mallory.key)
    asAdmin = await connect(admin.key)
  })

  after(async () => {
    for (const client of clients) await client.close()
    await server?.stop()
  })

  /** What of `b` the unrestricted caller sees: the targets of the attack. */
  async function targetsOfB() {
    const prompt = (await asAdmin.listPrompts()).prompts.find((p) => p.name.startsWith('b__'))
    const resource = (await asAdmin.listResources()).resources.find((r) => r.uri.startsWith('b+'))
    const template = (await asAdmin.listResourceTemplates()).resourceTemplates.find((t) =>
      t.uriTemplate.startsWith('b+'),
    )
    assert.ok(prompt && resource && template, 'b offers a prompt, a resource and a template')
    return { prompt: prompt.name, uri: resource.uri, template: template.uriTemplate }
  }

  test('the caller sees only a__echo in every list', async () => {
    assert.deepEqual(
      (await asMallory.listTools()).tools.map((t) => t.name),
      ['a__echo'],
    )
    assert.deepEqual((await asMallory.listPrompts()).prompts, [])
    assert.deepEqual((await asMallory.listResources()).resources, [])
    assert.deepEqual((await asMallory.listResourceTemplates()).resourceTemplates, [])
  })

  test("prompts/get, resources/read, subscribe and completion on b's items are refused", async () => {
    const b = await targetsOfB()
    const denied = { code: -32001, message: /may not/ }
    await assert.rejects(asMallory.getPrompt({ name: b.prompt }), denied)
    await assert.rejects(asMallory.readResource({ uri: b.uri }), denied)
    await assert.rejects(asMallory.subscribeResource({ uri: b.uri }), denied)
    await assert.rejects(asMallory.unsubscribeResource({ uri: b.uri }), denied)
    await assert.rejects(
      asMallory.complete({
        ref: { type: 'ref/prompt', name: b.prompt },
        argument: { name: 'x', value: '' },
      }),
      denied,
    )
    await assert.rejects(
      asMallory.complete({
        ref: { type: 'ref/resource', uri: b.template },
        argument: { name: 'resourceId', value: '' },
      }),
      denied,
    )
    await assert.rejects(asMallory.callTool({ name: 'b__echo', arguments: {} }), denied)

    // The same gateway still serves what is granted.
    const echoed = await asMallory.callTool({ name: 'a__echo', arguments: { message: 'hi' } })
    assert.match(JSON.stringify(echoed.content), /hi/)
    assert.ok((await asAdmin.getPrompt({ name: b.prompt })).messages.length > 0)
    assert.ok((await asAdmin.readResource({ uri: b.uri })).contents.length > 0)
  })
})
