/**
 * Every refusal names its fix (issue 29 point 6), with the server for which that message is the
 * whole experience: desktop-commander, a shell and file manager whose paths and URLs are chosen
 * at call time, so nothing can be granted ahead from its entry. Configured as its README says
 * (`npx -y @wonderwhy-er/desktop-commander`), no sandbox settings. A call on a path outside its
 * grants, and a fetch of a host not granted, must give the client the refused path or host and
 * the exact config line that grants it, log a `sandbox refusal` line and the call as an error.
 * The line is then put in the entry as it says, and the same call must work: the evidence is
 * the file on disk, and the request the local HTTP server received, outside Barbican.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { textOf } from './content.ts'
import {
  type Gateway,
  importConfig,
  logLines,
  type Mechanism,
  serve,
  workspace,
  writeClaudeConfig,
} from './real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry (one file
// per mechanism: the install and the fallback's package copy take most of a file's time limit).
const SPEC = '@wonderwhy-er/desktop-commander@0.2.52'

/** Calls `tool` and returns its text and whether it was an error, never throwing on one. */
async function call(gateway: Gateway, tool: string, args: Record<string, unknown>) {
  const client = new Client({ name: 'real-servers', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)))
  try {
    const result = await client.callTool({ name: tool, arguments: args }, undefined, {
      timeout: 60_000,
    })
    return { text: textOf(result), isError: result.isError === true }
  } finally {
    await client.close()
  }
}

/** The `sandbox:` line a hint names, put into the entry of barbican.yaml as it says. */
function applyFix(file: string, fix: string): void {
  const yaml = readFileSync(file, 'utf8')
  assert.match(yaml, /^ {2}desktop-commander:\n/m)
  writeFileSync(file, yaml.replace(/^( {2}desktop-commander:\n)/m, `$1    ${fix}\n`))
}

/** The suite under `mechanism` (real-servers-desktop-commander*.test.ts, one per mechanism). */
export function desktopCommanderSuite(mechanism: Mechanism): void {
  const project = workspace(`desktop-commander-${mechanism}`)
  let file: string
  let web: Server
  let port: number
  const requests: string[] = []

  before(async () => {
    writeClaudeConfig(project.dir, { 'desktop-commander': { command: 'npx', args: ['-y', SPEC] } })
    web = createServer((req, res) => {
      requests.push(req.url ?? '')
      res.end('served outside\n')
    })
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
    port = (web.address() as AddressInfo).port
  })

  after(async () => {
    await new Promise((resolve) => web.close(resolve))
    project.remove()
  })

  describe(`desktop-commander as its README says, under ${mechanism}`, () => {
    // A folder and a file of the project's that the entry never names: outside its grants.
    const outside = join(project.dir, 'outside')
    const target = join(outside, 'note.txt')
    const secret = join(project.dir, 'elsewhere.txt')
    const writeFix = `sandbox: { fs: { write: ["${outside}"] } }`

    before(async () => {
      mkdirSync(outside)
      writeFileSync(secret, 'not granted\n')
      file = (await importConfig(project.dir)).file
    })

    test('each refusal names the path or host and the line that grants it; the call is an error', async () => {
      const gateway = await serve(file, mechanism)
      const url = `http://127.0.0.1:${port}/page`
      let fetched: { text: string; isError: boolean }
      try {
        const written = await call(gateway, 'write_file', { path: target, content: 'kept\n' })
        assert.equal(written.isError, true, written.text)
        assert.match(written.text, /Barbican: upstream "desktop-commander" is sandboxed/)
        assert.ok(written.text.includes(target), written.text)
        assert.ok(written.text.includes(`in the config: ${writeFix}`), written.text)
        const read = await call(gateway, 'read_file', { path: secret })
        assert.equal(read.isError, true, read.text)
        assert.doesNotMatch(read.text, /not granted\n/)
        const readFix = `sandbox: { fs: { read: ["${secret}"] } }`
        assert.ok(read.text.includes(`in the config: ${readFix}`), read.text)
        fetched = await call(gateway, 'read_file', { path: url, isUrl: true })
      } finally {
        await gateway.stop()
      }
      assert.equal(existsSync(target), false)
      // Read once it stopped: a call's line is written after its reply.
      const warned = logLines(gateway, /"msg":"sandbox refusal"/).join('\n')
      assert.ok(warned.includes(JSON.stringify(writeFix).slice(1, -1)), gateway.log())
      const lines = logLines(gateway, /"msg":"tools\/call /)
      assert.equal(lines.length, 3, lines.join('\n'))
      assert.match(lines[0]!, /write_file error tool_error/)
      assert.match(lines[1]!, /read_file error tool_error/)
      if (mechanism === 'node-permission') {
        // Said by check and the log as `network not confined`: the page is fetched.
        assert.equal(fetched.isError, false, fetched.text)
        assert.deepEqual(requests, ['/page'])
        return
      }
      assert.equal(fetched.isError, true, fetched.text)
      assert.deepEqual(requests, [], 'the server never reached the host')
      const hostFix = `sandbox: { network: { allow: ["127.0.0.1:${port}"] } }`
      assert.ok(fetched.text.includes(`127.0.0.1:${port} is outside its grants`), fetched.text)
      assert.ok(fetched.text.includes(`in the config: ${hostFix}`), fetched.text)
      assert.match(lines[2]!, /read_file error tool_error/)
    })

    test('with the line it names in its entry, the same write works: the file is on disk', async () => {
      applyFix(file, writeFix)
      const gateway = await serve(file, mechanism)
      try {
        const written = await call(gateway, 'write_file', { path: target, content: 'kept\n' })
        assert.equal(written.isError, false, written.text)
      } finally {
        await gateway.stop()
      }
      assert.equal(readFileSync(target, 'utf8'), 'kept\n')
    })
  })
}
