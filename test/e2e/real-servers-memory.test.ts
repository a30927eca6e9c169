/**
 * server-memory as its README configures it (issue 29 point 7), confined with no sandbox
 * settings: without MEMORY_FILE_PATH (it writes next to its own code, which Barbican keeps in
 * the upstream's state directory), with it pointing at a data folder, and with it under the
 * host's /tmp. What it saved must survive a gateway restart, and be on disk where the user
 * expects it: the evidence is the jsonl file, read outside Barbican.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import {
  connect,
  importConfig,
  MECHANISMS,
  pinnedVersion,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

const PACKAGE = '@modelcontextprotocol/server-memory'
const SPEC = `${PACKAGE}@${pinnedVersion(PACKAGE)}`

/** Every file named `name` under `dir`, at any depth (symlinks not followed). */
function filesNamed(dir: string, name: string): string[] {
  if (!existsSync(dir)) return []
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((entry) => entry.isFile() && entry.name === name)
    .map((entry) => join(entry.parentPath, entry.name))
}

for (const mechanism of MECHANISMS) {
  describe(`server-memory as its README says, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let dataFile: string
    let tmpDir: string
    let tmpFile: string
    let file: string

    before(async () => {
      project = workspace(`memory-${mechanism}`)
      // A data folder of the user's, outside /tmp, and one under the host's /tmp.
      const data = join(project.dir, 'data')
      mkdirSync(data)
      dataFile = join(data, 'memory.jsonl')
      tmpDir = mkdtempSync('/tmp/barbican-real-memory-')
      tmpFile = join(tmpDir, 'memory.jsonl')
      // The README's three forms: no env, MEMORY_FILE_PATH to a file that does not exist yet.
      writeClaudeConfig(project.dir, {
        memory: { command: 'npx', args: ['-y', SPEC] },
        'memory-data': { command: 'npx', args: ['-y', SPEC], env: { MEMORY_FILE_PATH: dataFile } },
        'memory-tmp': { command: 'npx', args: ['-y', SPEC], env: { MEMORY_FILE_PATH: tmpFile } },
      })
      file = (await importConfig(project.dir)).file
    })

    after(() => {
      project.remove()
      rmSync(tmpDir, { recursive: true, force: true })
    })

    test('create_entities is saved, and read_graph shows it after a gateway restart', async () => {
      const upstreams = ['memory', 'memory-data', 'memory-tmp']
      let gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        for (const name of upstreams) {
          await client.call(`${name}__create_entities`, {
            entities: [{ name: `ada-${name}`, entityType: 'person', observations: ['wrote it'] }],
          })
        }
        await client.close()
      } finally {
        await gateway.stop()
      }
      gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        for (const name of upstreams) {
          const graph = await client.call(`${name}__read_graph`)
          assert.match(graph, new RegExp(`ada-${name}`), `${name} kept it:\n${gateway.log()}`)
        }
        await client.close()
      } finally {
        await gateway.stop()
      }
    })

    test('each file is on disk where the user expects it', () => {
      assert.match(readFileSync(dataFile, 'utf8'), /ada-memory-data/)
      assert.match(readFileSync(tmpFile, 'utf8'), /ada-memory-tmp/)
      // Without MEMORY_FILE_PATH it writes next to its code: in the upstream's own state
      // directory, never into the package install that every upstream of it shares.
      const state = join(project.dir, '.barbican/state/memory')
      const saved = filesNamed(state, 'memory.jsonl')
      assert.equal(saved.length, 1, `one memory.jsonl under ${state}: ${saved.join(', ')}`)
      assert.match(readFileSync(saved[0] as string, 'utf8'), /ada-memory"/)
      assert.deepEqual(filesNamed(join(project.dir, '.barbican/npm'), 'memory.jsonl'), [])
    })
  })
}
