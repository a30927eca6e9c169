/**
 * The "client under test" for the conformance suite's client mode, where the client is
 * Barbican's upstream-facing side. The suite starts a scenario server and runs this file with
 * its URL as the last argument (and `MCP_CONFORMANCE_SCENARIO` set); the driver starts Barbican
 * with that server as its only upstream (Streamable HTTP), connects an official SDK v1 client to
 * Barbican and does what the scenario expects a client to do. What the suite checks is what
 * Barbican sent upstream: its handshake or probe, per-request `_meta`, the 2026 routing and
 * `Mcp-Param-*` headers, the echoed `requestState`, and schema preservation.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

type Json = Record<string, unknown>

const upstreamUrl = process.argv.at(-1) ?? ''
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? ''

const loaded = parseConfigText(
  JSON.stringify({
    listen: '127.0.0.1:0',
    upstreams: { upstream: { url: upstreamUrl, transport: 'streamable-http' } },
  }),
  { json: true },
)
const gateway = await startServer(loaded.config, silentLogger)
const client = new Client(
  { name: 'barbican-conformance-driver', version: '1.0.0' },
  { capabilities: { elicitation: {}, sampling: {} } },
)
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  // Accept with every default the form offers (elicitation-sep1034-client-defaults).
  const schema = (request.params as Json).requestedSchema as Json | undefined
  const content: Json = {}
  for (const [key, prop] of Object.entries((schema?.properties as Json | undefined) ?? {})) {
    const p = prop as Json
    if (p.default !== undefined) content[key] = p.default
  }
  return { action: 'accept', content }
})

async function drive(): Promise<void> {
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`)))
  const { tools } = await client.listTools()
  const call = (name: string, args: Json) =>
    client.callTool({ name, arguments: args }).catch((error: unknown) => {
      process.stderr.write(`tools/call ${name} failed: ${String(error)}\n`)
    })
  // Scenarios that need particular calls name them in MCP_CONFORMANCE_CONTEXT.
  const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as {
    toolCalls?: { name: string; arguments: Json }[]
  }
  if (context.toolCalls) {
    for (const c of context.toolCalls) await call(c.name, c.arguments)
    return
  }
  switch (scenario) {
    case 'tools_call':
      await call('add_numbers', { a: 5, b: 3 })
      return
    case 'http-standard-headers': {
      if (tools[0]) await call(tools[0].name, {})
      const resources = await client.listResources().catch(() => ({ resources: [] }))
      const uri = resources.resources[0]?.uri
      if (uri) await client.readResource({ uri }).catch(() => {})
      const prompts = await client.listPrompts().catch(() => ({ prompts: [] }))
      const prompt = prompts.prompts[0]?.name
      if (prompt) await client.getPrompt({ name: prompt, arguments: {} }).catch(() => {})
      return
    }
    case 'json-schema-ref-no-deref':
    case 'json-schema-2020-12-preservation': {
      const focal = tools.find((t) => t.name === 'json_schema_2020_12_tool') ?? tools[0]
      const echo = tools.find((t) => t !== focal)
      if (focal && echo) await call(echo.name, { schema: focal.inputSchema })
      return
    }
    default:
      // initialize, request-metadata, sep-2322-client-request-state, elicitation defaults…:
      // call every tool once; Barbican's own behaviour on the upstream hop is what is checked.
      for (const tool of tools) await call(tool.name, {})
  }
}

try {
  await drive()
} finally {
  await client.close().catch(() => {})
  await gateway.stop()
}
