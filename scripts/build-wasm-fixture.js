#!/usr/bin/env node
// Builds test/fixtures/wasm/servlet.wasm from servlet.ts with the pinned AssemblyScript
// compiler. The output is deterministic for a given compiler version and flags, so
// src/transports/wasm-outbound.integration.test.ts checks that a fresh build matches the committed file.
import { main } from 'assemblyscript/asc'

const out = process.argv[2] ?? 'test/fixtures/wasm/servlet.wasm'
const { error, stderr } = await main([
  'test/fixtures/wasm/servlet.ts',
  '--outFile',
  out,
  '--optimize',
  '--runtime',
  'stub',
  '--use',
  'abort=',
  '--noAssert',
  // A declared maximum, so Barbican's memory check (maxMemoryMb) can bound the module: 1 MiB.
  '--maximumMemory',
  '16',
])
if (error) {
  process.stderr.write(stderr.toString())
  process.exit(1)
}
