import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { parse } from 'yaml'
import { compileFilter } from './filter.ts'
import { configJsonSchema } from './json-schema.ts'
import { loadConfig } from './load.ts'

const examples = fileURLToPath(new URL('../../examples/', import.meta.url))

describe('examples/', () => {
  test('single serves one upstream at /mcp with names unchanged', async () => {
    const loaded = await loadConfig({ cwd: `${examples}single`, env: {} })
    assert.equal(loaded?.source.format, 'native')
    assert.deepEqual(
      loaded?.config.upstreams.map((u) => u.name),
      ['everything'],
    )
    assert.deepEqual(
      loaded?.config.servers.map((s) => [s.path, s.namespacing.mode]),
      [['/mcp', 'never']],
    )
  })

  test('multiplex namespaces the default server and filters the read-only one', async () => {
    const loaded = await loadConfig({ cwd: `${examples}multiplex`, env: { DATA_DIR: '/srv/data' } })
    assert.ok(loaded)
    const [all, readonly] = loaded.config.servers
    assert.equal(all?.namespacing.mode, 'always')
    assert.equal(readonly?.path, '/mcp/readonly')
    assert.equal(readonly?.namespacing.mode, 'never')
    const visible = compileFilter(readonly?.tools.include, readonly?.tools.exclude)
    assert.deepEqual(
      ['read_text_file', 'list_directory', 'write_file', 'edit_file', 'create_directory'].map(
        visible,
      ),
      [true, true, false, false, false],
    )
    const files = loaded.config.upstreams.find((u) => u.name === 'files')
    assert.ok(files && 'args' in files)
    assert.equal(files.args.at(-1), '/srv/data')
  })

  test('claude-desktop loads as a Claude file with both servers', async () => {
    const loaded = await loadConfig({
      path: `${examples}claude-desktop/claude_desktop_config.json`,
      env: {},
    })
    assert.equal(loaded?.source.format, 'claude')
    assert.deepEqual(
      loaded?.config.upstreams.map((u) => u.name),
      ['filesystem', 'memory'],
    )
    assert.deepEqual(loaded?.warnings, [])
  })

  test('tenants gives two tenants the same upstream name and their own servers', async () => {
    const loaded = await loadConfig({
      cwd: `${examples}tenants`,
      env: { GLOBEX_SECRET: 'not-a-real-secret' },
    })
    assert.ok(loaded)
    assert.deepEqual(
      loaded.config.upstreams.map((u) => u.name),
      ['docs'],
    )
    const [acme, globex] = loaded.config.tenants ?? []
    assert.deepEqual(
      acme?.servers.map((s) => s.path),
      ['/mcp', '/mcp/readonly'],
    )
    assert.deepEqual([acme?.upstreams[0]?.name, globex?.upstreams[0]?.name], ['github', 'github'])
    assert.equal(acme?.rateLimits?.[0]?.limit, 600)
    assert.deepEqual(
      globex?.servers.map((s) => s.path),
      ['/mcp'],
    )
  })

  test('the native examples validate against the published JSON Schema', () => {
    const validate = new Ajv2020({ strict: false }).compile(configJsonSchema())
    for (const name of ['single', 'multiplex', 'tenants']) {
      const value = parse(readFileSync(`${examples}${name}/barbican.yaml`, 'utf8'))
      assert.equal(validate(value), true, `${name}: ${JSON.stringify(validate.errors)}`)
    }
  })
})
