#!/usr/bin/env node
// Entry point of the `barbican` command. Barbican's sources are TypeScript run directly by Node's
// type stripping (Node >= 22.18); a build (`npm run build`) produces dist/ for installs where the
// sources sit under node_modules, where Node refuses to strip types.
import { existsSync } from 'node:fs'

const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `barbican: Node.js ${process.versions.node} is too old; Barbican needs Node.js 22.18 or newer.\n` +
      'From a checkout, run it through npm (npm start, npx barbican), which uses the pinned Node.\n',
  )
  process.exit(1)
}
const built = new URL('../dist/cli/main.js', import.meta.url)
const source = new URL('../src/cli/main.ts', import.meta.url)
const entry = existsSync(source) ? source : built
const { main } = await import(entry.href)
process.exitCode = await main(process.argv.slice(2))
