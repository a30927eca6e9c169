/**
 * server-redis as its README configures it (issue 29 point 7): the Redis URL is its one
 * argument, and it must reach the local Redis it names, confined, with no sandbox settings. The
 * evidence is the key it set, read back with a Redis client outside Barbican.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { createClient } from 'redis'
import {
  connect,
  importConfig,
  MECHANISMS,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry.
const SPEC = '@modelcontextprotocol/server-redis@2025.4.25'
const URL = 'redis://127.0.0.1:6379'

for (const mechanism of MECHANISMS) {
  describe(`server-redis as its README says, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let file: string
    const key = `barbican:real-servers:${randomBytes(6).toString('hex')}`
    const redis = createClient({ url: URL })

    before(async () => {
      await redis.connect()
      project = workspace(`redis-${mechanism}`)
      writeClaudeConfig(project.dir, { redis: { command: 'npx', args: ['-y', SPEC, URL] } })
      file = (await importConfig(project.dir)).file
    })

    after(async () => {
      await redis.del(key)
      await redis.quit()
      project.remove()
    })

    test('sets a key in the Redis its URL names', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        await client.call('set', { key, value: `set under ${mechanism}` })
        await client.close()
        assert.equal(await redis.get(key), `set under ${mechanism}`, gateway.log())
      } finally {
        await gateway.stop()
      }
    })
  })
}
