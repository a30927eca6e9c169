import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '../config/load.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'

// loadForCommand runs the loader in a worker thread: what comes back must be what an in-process
// load returns, and every failure must reach the command's stderr.
const FIXTURES = fileURLToPath(new URL('../config/fixtures/', import.meta.url))

function capture(): CliIo & { err: string[] } {
  const err: string[] = []
  return { stdout: () => {}, stderr: (t) => err.push(t), err }
}
const options = (config?: string): CommandOptions => ({
  config,
  allowInsecureNonLoopback: false,
})

describe('loadForCommand (worker thread)', () => {
  let dir: string
  const savedKey = process.env.API_KEY
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'barbican-load-'))
    // The fixtures interpolate ${API_KEY}; the worker sees the environment of the call.
    process.env.API_KEY = 'key-for-the-test'
  })
  after(() => {
    rmSync(dir, { recursive: true, force: true })
    if (savedKey === undefined) delete process.env.API_KEY
    else process.env.API_KEY = savedKey
  })

  for (const name of ['native.yaml', 'native.json', 'claude-desktop.json']) {
    test(`${name}: the same config as an in-process load`, async () => {
      const path = join(FIXTURES, name)
      const io = capture()
      const loaded = await loadForCommand(options(path), io, false)
      const direct = await loadConfig({ path, cwd: process.cwd(), env: process.env })
      assert.deepEqual(loaded, direct)
      assert.deepEqual(
        io.err,
        (direct?.warnings ?? []).map((w) => `barbican: warning: ${w}\n`),
      )
    })
  }

  test('an invalid file: undefined, and the problems on stderr', async () => {
    const path = join(dir, 'bad.yaml')
    writeFileSync(path, 'upstreams:\n  x:\n    command: 42\n')
    const io = capture()
    assert.equal(await loadForCommand(options(path), io, true), undefined)
    assert.match(io.err.join(''), /^barbican: .*bad\.yaml.*\n[\s\S]*command/)
  })

  test('a missing explicit file is an error, not the demo', async () => {
    const io = capture()
    assert.equal(await loadForCommand(options(join(dir, 'none.yaml')), io, true), undefined)
    assert.match(io.err.join(''), /does not exist/)
  })

  test('no default file: the demo when allowed, otherwise a hint', async () => {
    const cwd = process.cwd()
    process.chdir(dir)
    try {
      const none = capture()
      assert.equal(await loadForCommand(options(), none, false), undefined)
      assert.match(none.err.join(''), /no configuration: pass --config FILE/)
      const demo = await loadForCommand(options(), capture(), true)
      assert.equal(demo?.source.format, 'demo')
      assert.ok((demo?.config.upstreams.length ?? 0) > 0)
    } finally {
      process.chdir(cwd)
    }
  })
})
