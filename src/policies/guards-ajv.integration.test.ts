/**
 * Argument and output validation loads ajv on first use: a child process proves a gateway
 * without validation never loads it (the module cache of this process is shared by every test).
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { GuardsConfig } from '../config/config.ts'

const OFF: GuardsConfig = {
  arguments: 'off',
  output: 'off',
  oversize: 'truncate',
  redact: false,
  redactPatterns: [],
}
test('ajv is loaded only when argument or output validation is configured', () => {
  const guardsModule = fileURLToPath(new URL('./guards.ts', import.meta.url))
  const loadsAjv = (config: GuardsConfig) =>
    execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { createRequire } from 'node:module'
         const { guards } = await import(${JSON.stringify(guardsModule)})
         guards(${JSON.stringify(config)})
         const cache = createRequire(import.meta.url).cache
         process.stdout.write(String(Object.keys(cache).some((p) => p.includes('/ajv/'))))`,
      ],
      { encoding: 'utf8' },
    )
  assert.equal(loadsAjv({ ...OFF, redact: true, maxResultBytes: 100 }), 'false')
  assert.equal(loadsAjv({ ...OFF, output: 'warn' }), 'true')
})
