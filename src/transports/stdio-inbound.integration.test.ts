import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { EchoHandler } from '../../test/fixtures/inbound-echo-handler.ts'
import { within } from '../../test/fixtures/inbound-http-client.ts'
import { serveStdio } from './stdio-inbound.ts'

/** An in-process stdio link: write lines in, read parsed lines out. */
function link(options: { maxLineBytes?: number } = {}) {
  const input = new PassThrough()
  const output = new PassThrough()
  const handler = new EchoHandler()
  const transport = serveStdio(handler, { input, output, ...options })
  const lines: string[] = []
  const waiters: Array<() => void> = []
  let buffered = ''
  output.setEncoding('utf8')
  output.on('data', (chunk: string) => {
    buffered += chunk
    let newline = buffered.indexOf('\n')
    while (newline >= 0) {
      lines.push(buffered.slice(0, newline))
      buffered = buffered.slice(newline + 1)
      newline = buffered.indexOf('\n')
    }
    for (const waiter of waiters.splice(0)) waiter()
  })
  const reply = async (index: number): Promise<Record<string, unknown>> => {
    while (lines.length <= index) {
      await within(
        new Promise<void>((resolve) => waiters.push(resolve)),
        2000,
        `output line ${index}`,
      )
    }
    return JSON.parse(lines[index] as string)
  }
  const send = (value: unknown) =>
    input.write(`${typeof value === 'string' ? value : JSON.stringify(value)}\n`)
  return { input, output, handler, transport, lines, reply, send }
}

const initialize = (version: string) => ({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 't', version: '1' } },
})

describe('stdio inbound', () => {
  it('answers requests line by line and writes nothing but JSON-RPC on the output', async () => {
    const l = link()
    l.send(initialize('2025-06-18'))
    l.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'hi' } },
    })
    assert.deepEqual((await l.reply(0)).id, 0)
    const call = await l.reply(1)
    assert.deepEqual(call.result, { content: [{ type: 'text', text: 'default:hi' }] })
    for (const line of l.lines) assert.equal(JSON.parse(line).jsonrpc, '2.0')
    l.input.end()
  })

  it('replies -32700 to a line that is not JSON and keeps serving the next line', async () => {
    const l = link()
    l.send('{not json')
    l.send({ jsonrpc: '2.0', id: 7, method: 'ping' })
    const error = await l.reply(0)
    assert.equal(error.id, null)
    assert.equal((error.error as { code: number }).code, -32700)
    assert.deepEqual(await l.reply(1), { jsonrpc: '2.0', id: 7, result: {} })
    l.input.end()
  })

  it('replies -32600 with the id to a message with a bad envelope, and accepts CRLF line ends', async () => {
    const l = link()
    l.input.write('{"jsonrpc":"1.0","id":3,"method":"ping"}\r\n')
    const error = await l.reply(0)
    assert.equal(error.id, 3)
    assert.equal((error.error as { code: number }).code, -32600)
    l.input.end()
  })

  it('skips an over-long line with one error reply and serves the following line', async () => {
    const l = link({ maxLineBytes: 64 })
    // Sent in pieces so the limit is hit before the newline arrives.
    l.input.write(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"${'x'.repeat(100)}`)
    l.input.write(`${'y'.repeat(1000)}"}}\n`)
    l.send({ jsonrpc: '2.0', id: 2, method: 'ping' })
    const error = await l.reply(0)
    assert.equal((error.error as { code: number }).code, -32700)
    assert.match((error.error as { message: string }).message, /64 bytes/)
    assert.deepEqual(await l.reply(1), { jsonrpc: '2.0', id: 2, result: {} })
    assert.equal(l.lines.length, 2)
    l.input.end()
  })

  it('refuses batches until the session negotiated 2025-03-26, then accepts them', async () => {
    const l = link()
    const batch = [
      { jsonrpc: '2.0', id: 'a', method: 'ping' },
      { jsonrpc: '2.0', id: 'b', method: 'ping' },
    ]
    l.send(batch)
    assert.equal(((await l.reply(0)).error as { code: number }).code, -32600)
    l.send(initialize('2025-03-26'))
    assert.equal((await l.reply(1)).id, 0)
    l.send(batch)
    const ids = [(await l.reply(2)).id, (await l.reply(3)).id].sort()
    assert.deepEqual(ids, ['a', 'b'])
    l.input.end()
  })

  it('closes the transport when the input reaches EOF', async () => {
    const l = link()
    const closed = new Promise<void>((resolve) => {
      const previous = l.transport.onclose
      l.transport.onclose = () => {
        previous?.()
        resolve()
      }
    })
    l.input.end()
    await within(closed, 2000, 'close on EOF')
    assert.equal(l.handler.connections[0]?.closed, true)
    await assert.rejects(l.transport.send({ jsonrpc: '2.0', method: 'x' }))
  })

  it('serves the official SDK stdio client in a spawned process, which exits on stdin EOF', async () => {
    const script = fileURLToPath(
      new URL('../../test/fixtures/inbound-stdio-server.ts', import.meta.url),
    )
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [script],
      stderr: 'pipe',
    })
    let stderr = ''
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const client = new Client({ name: 'sdk-test', version: '1.0.0' })
    try {
      await within(client.connect(transport), 10_000, 'SDK initialize over stdio')
      assert.equal(client.getServerVersion()?.name, 'echo')
      const tools = await client.listTools()
      assert.deepEqual(
        tools.tools.map((t) => t.name),
        ['echo', 'slow', 'progress', 'ask'],
      )
      const result = await client.callTool({ name: 'echo', arguments: { text: 'over stdio' } })
      assert.deepEqual(result.content, [{ type: 'text', text: 'default:over stdio' }])
    } finally {
      // The SDK ends the child's stdin and waits for it to exit (SIGTERM only after 2 s).
      await client.close()
    }
    assert.match(stderr, /stdin closed/)
  })
})
