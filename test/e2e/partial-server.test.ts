/**
 * A partial server is still a server (issue 29 point 5, ADR 099), with the real server that
 * showed it: @modelcontextprotocol/server-postgres 0.6.2 advertises resources but answers
 * `resources/templates/list` with "Method not found". Its one tool must reach the virtual
 * server and answer a query against the local PostgreSQL; `check` names the held-back list.
 * Not a devDependency: run with `npx -y` as its README says (npx fetches it from the registry;
 * confined, Barbican installs it into its package cache).
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { runCli } from '../support/cli.ts'

const bin = fileURLToPath(new URL('../../bin/barbican.js', import.meta.url))
const SPEC = '@modelcontextprotocol/server-postgres@0.6.2'
const URL_ARG = 'postgresql://postgres@127.0.0.1/test'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-partial-')))
after(() => rmSync(dir, { recursive: true, force: true }))

function configFile(name: string, entry: Record<string, unknown>): string {
  const file = join(dir, `${name}.json`)
  const upstream = { command: 'npx', args: ['-y', SPEC, URL_ARG], ...entry }
  // The first start may fetch the package: the listing waits for it rather than leave it out.
  const limits = { listDeadlineMs: 60_000, handshakeWaitMs: 60_000 }
  writeFileSync(file, JSON.stringify({ listen: { port: 0 }, limits, upstreams: { pg: upstream } }))
  return file
}

/** `barbican serve` as a child; resolves with its /mcp URL once it says it serves. */
function serve(file: string): { child: ChildProcess; url: Promise<string>; log: () => string } {
  let stderr = ''
  const child = spawn(process.execPath, [bin, 'serve', '--config', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${stderr}`)), 120_000)
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
      const match = /serving .* at (http:\/\/[^\s]+\/mcp)/.exec(stderr)
      if (match) {
        clearTimeout(timer)
        resolve(match[1]!)
      }
    })
  })
  return { child, url, log: () => stderr }
}

describe('server-postgres: a failing optional list does not take its tools', () => {
  test('check lists its tool and names the held-back templates list', async () => {
    const run = await runCli(['check', '--config', configFile('check', { sandbox: 'none' })])
    assert.equal(run.code, 0, run.stdout + run.stderr)
    assert.match(run.stdout, /ok {4}pg: .*, 1 tool\(s\)/)
    assert.match(
      run.stdout,
      /warn {2}pg: resources\/templates\/list held back \(its tools are kept\): .*Method not found \(-32601\)/,
    )
    assert.match(run.stdout, /ok {4}server default: 1 tool\(s\)/)
  })

  test('the virtual server offers its query tool, which answers from PostgreSQL', async () => {
    const gateway = serve(configFile('serve', { sandbox: 'none' }))
    try {
      const client = new Client({ name: 'partial-test', version: '1' })
      await client.connect(new StreamableHTTPClientTransport(new URL(await gateway.url)))
      const { tools } = await client.listTools()
      assert.deepEqual(
        tools.map((t) => t.name),
        ['query'],
        gateway.log(),
      )
      const reply = await client.callTool({
        name: 'query',
        arguments: { sql: "SELECT 'partial-ok' AS answer" },
      })
      assert.notEqual(reply.isError, true, JSON.stringify(reply))
      assert.match(JSON.stringify(reply.content), /partial-ok/)
      await client.close()
      assert.match(gateway.log(), /list held back.*resources\/templates\/list/)
    } finally {
      gateway.child.kill()
    }
  })

  test('confined, its tool is listed too (the templates list alone is held back)', async () => {
    const run = await runCli(['check', '--config', configFile('confined', {})])
    assert.equal(run.code, 0, run.stdout + run.stderr)
    assert.match(run.stdout, /ok {4}pg: .*, 1 tool\(s\)/)
    assert.match(run.stdout, /resources\/templates\/list held back/)
    assert.match(run.stdout, /ok {4}server default: 1 tool\(s\)/)
  })
})
