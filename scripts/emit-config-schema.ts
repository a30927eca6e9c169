// Writes schema/config.json from the zod schema in src/config/schema.ts. Run after changing the
// schema: `node_modules/.bin/node scripts/emit-config-schema.ts` (a test fails while it is stale).
// With --check, only reports whether the committed file is current (exit code 1 if not).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { configJsonSchemaText } from '../src/config/json-schema.ts'

const target = fileURLToPath(new URL('../schema/config.json', import.meta.url))
const text = configJsonSchemaText()

if (process.argv.includes('--check')) {
  let current = ''
  try {
    current = readFileSync(target, 'utf8')
  } catch {}
  if (current !== text) {
    process.stderr.write('schema/config.json is stale; run scripts/emit-config-schema.ts\n')
    process.exitCode = 1
  }
} else {
  mkdirSync(dirname(target), { recursive: true })
  writeFileSync(target, text)
  process.stdout.write(`wrote ${target}\n`)
}
