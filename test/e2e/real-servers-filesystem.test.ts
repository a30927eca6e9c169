/**
 * server-filesystem as its README configures it (issue 29 point 7): the folders it may use are
 * its arguments. Barbican runs as root here, as in most containers; the confined server must
 * still write into the root-owned folder it was given. The evidence is the file on disk, with
 * its content, owned by root (no chown of the user's data).
 */
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, statSync } from 'node:fs'
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

const PACKAGE = '@modelcontextprotocol/server-filesystem'
const SPEC = `${PACKAGE}@${pinnedVersion(PACKAGE)}`

for (const mechanism of MECHANISMS) {
  describe(`server-filesystem as its README says, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let data: string
    let file: string

    before(async () => {
      project = workspace(`filesystem-${mechanism}`)
      data = join(project.dir, 'data')
      mkdirSync(data, { mode: 0o755 })
      writeClaudeConfig(project.dir, {
        filesystem: { command: 'npx', args: ['-y', SPEC, data] },
      })
      file = (await importConfig(project.dir)).file
    })

    after(() => project.remove())

    test('writes into the folder it was given, which stays root-owned', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        const target = join(data, 'notes', 't.txt')
        await client.call('create_directory', { path: join(data, 'notes') })
        await client.call('write_file', { path: target, content: `written under ${mechanism}` })
        assert.match(await client.call('list_directory', { path: data }), /\[DIR\] notes/)
        await client.close()
        assert.equal(readFileSync(target, 'utf8'), `written under ${mechanism}`)
        const made = statSync(target)
        const folder = statSync(data)
        assert.equal(folder.uid, process.getuid?.(), 'the folder was not handed over')
        assert.equal(made.uid, process.getuid?.(), 'the file belongs to the user who runs Barbican')
      } finally {
        await gateway.stop()
      }
    })
  })
}
