import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import type { StdioUpstreamConfig } from './config.ts'
import { demoConfig, demoDataDir, demoStorePath, resolvePackageBin } from './demo.ts'

const dataDir = mkdtempSync(join(tmpdir(), 'barbican-demo-test-'))
after(() => rmSync(dataDir, { recursive: true, force: true }))

describe('demoConfig', () => {
  test('aggregates the everything, memory and files reference servers', () => {
    const loaded = demoConfig({ dataDir })
    assert.deepEqual(loaded.source, { path: undefined, format: 'demo' })
    assert.deepEqual(loaded.warnings, [])
    assert.deepEqual(
      loaded.config.upstreams.map((u) => u.name),
      ['everything', 'memory', 'files'],
    )
    assert.deepEqual(loaded.config.servers[0]?.namespacing, { mode: 'always', separator: '__' })
    assert.deepEqual(loaded.config.listen, { host: '127.0.0.1', port: 7300 })
  })

  test('launches each upstream with the running node and an entry file that exists on disk', () => {
    const { config } = demoConfig({ dataDir })
    for (const upstream of config.upstreams as StdioUpstreamConfig[]) {
      assert.equal(upstream.transport, 'stdio')
      assert.equal(upstream.command, process.execPath)
      const entry = upstream.args[0] ?? ''
      assert.ok(existsSync(entry), `${upstream.name}: ${entry}`)
      assert.match(entry, /node_modules\/@modelcontextprotocol\/server-[a-z]+\/dist\/index\.js$/)
    }
  })

  test('keeps the demo data out of node_modules, memory in its state folder', () => {
    const { config } = demoConfig({ dataDir })
    const [, memory, files] = config.upstreams as StdioUpstreamConfig[]
    assert.equal(memory?.env.MEMORY_FILE_PATH, join(dataDir, 'state/memory/memory.jsonl'))
    assert.ok(
      memory?.sandbox !== 'none' && memory?.sandbox.stateDir === join(dataDir, 'state/memory'),
    )
    assert.equal(files?.args[1], join(dataDir, 'files'))
    assert.ok(existsSync(join(dataDir, 'files', 'welcome.md')))
  })

  test('keeps its store and audit log in its data folder, not the working directory', () => {
    const { config } = demoConfig({ dataDir })
    assert.deepEqual(config.store, { kind: 'sqlite', path: demoStorePath(dataDir) })
    assert.equal(demoStorePath(dataDir), join(dataDir, 'barbican.db'))
    assert.ok(demoDataDir().startsWith(tmpdir()))
    assert.ok(!demoDataDir().startsWith(process.cwd()))
  })

  test('takes a listen override like a file would', () => {
    assert.deepEqual(demoConfig({ dataDir, listen: '127.0.0.1:0' }).config.listen, {
      host: '127.0.0.1',
      port: 0,
    })
  })

  test('resolves nothing for a package that is not installed', () => {
    assert.equal(resolvePackageBin('@modelcontextprotocol/server-does-not-exist'), undefined)
  })
})
