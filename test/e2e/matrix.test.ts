/**
 * The transport matrix: the official SDK clients (v1 and v2) over every inbound transport, to
 * Barbican, to the official server-everything over stdio and over Streamable HTTP. Each cell
 * lists tools and calls `echo`, checking the content that comes back.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  Client as ClientV2,
  SSEClientTransport as SSEClientTransportV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const barbicanBin = join(root, 'bin/barbican.js')

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/** Starts server-everything over Streamable HTTP and waits until it accepts connections. */
async function startHttpEverything(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort()
  const child = spawn(process.execPath, [everything, 'streamableHttp'], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server-everything did not start')), 20_000)
    child.stderr?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes(String(port))) {
        clearTimeout(timer)
        resolve()
      }
    })
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}`)))
  })
  return { url: `http://127.0.0.1:${port}/mcp`, child }
}

type Connect = (server: RunningServer, configFile: string) => Promise<{ client: AnyClient }>

interface AnyClient {
  listTools(): Promise<{ tools: { name: string }[] }>
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>
  close(): Promise<void>
}

const clientInfo = { name: 'matrix', version: '1.0.0' }

const CLIENTS: Record<string, Connect> = {
  'SDK v1 over Streamable HTTP': async (s) => {
    const client = new Client(clientInfo)
    await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`)))
    return { client }
  },
  'SDK v1 over legacy HTTP+SSE': async (s) => {
    const client = new Client(clientInfo)
    await client.connect(new SSEClientTransport(new URL(`${s.url}/sse`)))
    return { client }
  },
  'SDK v1 over WebSocket': async (s) => {
    const client = new Client(clientInfo)
    await client.connect(new WebSocketClientTransport(new URL(`${s.url.replace('http', 'ws')}/ws`)))
    return { client }
  },
  'SDK v1 over stdio (barbican stdio)': async (_s, configFile) => {
    const client = new Client(clientInfo)
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [barbicanBin, 'stdio', '--config', configFile],
        stderr: 'ignore',
      }),
    )
    return { client }
  },
  'SDK v2 over Streamable HTTP': async (s) => {
    const client = new ClientV2(clientInfo)
    await client.connect(new StreamableHTTPClientTransportV2(new URL(`${s.url}/mcp`)))
    return { client: client as unknown as AnyClient }
  },
  'SDK v2 over legacy HTTP+SSE': async (s) => {
    const client = new ClientV2(clientInfo)
    await client.connect(new SSEClientTransportV2(new URL(`${s.url}/sse`)))
    return { client: client as unknown as AnyClient }
  },
}

const UPSTREAMS: Record<string, () => Promise<{ upstream: object; stop: () => void }>> = {
  'server-everything over stdio': async () => ({
    upstream: { command: process.execPath, args: [everything, 'stdio'] },
    stop: () => {},
  }),
  'server-everything over Streamable HTTP': async () => {
    const { url, child } = await startHttpEverything()
    return { upstream: { url, transport: 'streamable-http' }, stop: () => child.kill('SIGKILL') }
  },
}

for (const [upstreamName, makeUpstream] of Object.entries(UPSTREAMS)) {
  describe(`Barbican in front of ${upstreamName}`, () => {
    let server: RunningServer
    let stopUpstream: () => void
    let configFile: string
    before(async () => {
      const { upstream, stop } = await makeUpstream()
      stopUpstream = stop
      const dir = mkdtempSync(join(tmpdir(), 'barbican-matrix-'))
      configFile = join(dir, 'barbican.json')
      const text = JSON.stringify({
        listen: '127.0.0.1:0',
        log: { level: 'error' },
        upstreams: { everything: upstream },
      })
      writeFileSync(configFile, text)
      const { config } = parseConfigText(text, { file: configFile })
      server = await startServer(config, silentLogger)
    })
    after(async () => {
      await server?.stop()
      stopUpstream?.()
    })

    for (const [clientName, connect] of Object.entries(CLIENTS)) {
      test(`${clientName}: lists tools and calls echo`, async () => {
        const { client } = await connect(server, configFile)
        try {
          const { tools } = await client.listTools()
          assert.ok(
            tools.some((t) => t.name === 'echo'),
            `echo missing from ${tools.map((t) => t.name).join(', ')}`,
          )
          const result = await client.callTool({
            name: 'echo',
            arguments: { message: `hi from ${clientName}` },
          })
          assert.equal(textOf(result), `Echo: hi from ${clientName}`)
        } finally {
          await client.close()
        }
      })
    }
  })
}
