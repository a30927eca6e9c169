#!/usr/bin/env node
// Entry point of the `barbican` command: runs dist/ (ADR 015) unless a source file is newer than
// the build, then src/ by type stripping. An installed package has no src/ and always runs dist/.
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 18)) {
  // In a checkout (src/ beside bin/), npm scripts run the Node the project pins; an installed
  // package has no src/, and its user needs a Node 22 of their own, or npx's for one run.
  const { existsSync } = process.getBuiltinModule?.('node:fs') ?? (await import('node:fs'))
  const checkout = existsSync(new URL('../src/cli/main.ts', import.meta.url))
  const args = process.argv.slice(2).join(' ')
  process.stderr.write(
    `barbican: Node.js ${process.versions.node} is too old; Barbican needs Node.js 22.18 or newer.\n` +
      (checkout
        ? 'In this checkout, run it through npm (npm start, npx barbican ...), which uses the ' +
          'Node 22 the project pins (run npm install first).\n'
        : `Run it once with Node 22 from npm: npx -p node@22 barbican${args ? ` ${args}` : ''}\n` +
          'or install Node 22 (https://nodejs.org, nvm install 22, fnm install 22).\n'),
  )
  process.exit(1)
}
// Built-in modules through process.getBuiltinModule, not `import`: an ES module import of a
// built-in reads every lazy getter on it, loading modules nothing here uses (ADR 015).
const { existsSync, readdirSync, readFileSync, statSync } = process.getBuiltinModule('node:fs')
const { fileURLToPath } = process.getBuiltinModule('node:url')
const built = new URL('../dist/main.js', import.meta.url)
const source = new URL('../src/cli/main.ts', import.meta.url)

/** When the last complete build started (ms since the epoch), or undefined without one. */
function buildStarted() {
  try {
    const value = Number(readFileSync(new URL('../dist/.build-started', import.meta.url), 'utf8'))
    return Number.isFinite(value) && existsSync(built) ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * Whether some file under src/ (tests aside) changed at or after `since`. A plain walk: the
 * recursive readdirSync costs 5 MB of RSS at each start (docs/performance.md).
 */
function sourceChangedSince(since) {
  const pending = [fileURLToPath(new URL('../src', import.meta.url))]
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`
      if (entry.isDirectory()) pending.push(path)
      else if (
        entry.isFile() &&
        !entry.name.endsWith('.test.ts') &&
        statSync(path).mtimeMs >= since
      )
        return true
    }
  }
  return false
}

let entry = built
if (existsSync(source)) {
  const started = buildStarted()
  entry = started !== undefined && !sourceChangedSince(started) ? built : source
}
const { main } = await import(entry.href)
process.exitCode = await main(process.argv.slice(2))
