#!/usr/bin/env node
// Entry point of the `barbican` command. Barbican's sources are TypeScript that Node (>= 22.18)
// can run directly by type stripping; `npm install` (the `prepare` script) and `npm run build`
// also bundle them into dist/, which starts faster and uses less memory (ADRs 011, 015). dist/ is run
// only when it is at least as new as every source file, so an edit is never shadowed by a
// stale build; installs without src/ (under node_modules, where Node refuses to strip types)
// always run dist/.
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `barbican: Node.js ${process.versions.node} is too old; Barbican needs Node.js 22.18 or newer.\n` +
      'From a checkout, run it through npm (npm start, npx barbican), which uses the pinned Node.\n',
  )
  process.exit(1)
}
// Built-in modules through process.getBuiltinModule, not `import`: an ES module import of a
// built-in reads every lazy getter on it, loading modules nothing here uses (ADR 015).
const { existsSync, readdirSync, readFileSync, statSync } = process.getBuiltinModule('node:fs')
const { fileURLToPath } = process.getBuiltinModule('node:url')
// Start-up allocates in one burst that would double V8's young generation twice (to 4 MB an idle
// gateway hardly uses): its growth is held until the command has started, when
// src/cli/startup-heap.ts puts V8's default back. An operator's own factor is left alone.
if (
  ![...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) =>
    a.includes('--semi-space-growth-factor'),
  )
)
  process.getBuiltinModule('node:v8').setFlagsFromString('--semi-space-growth-factor=1')
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
 * Whether some file under src/ (tests aside) changed at or after `since`. A plain walk on string
 * paths: `readdirSync(dir, { recursive: true })` joins every path through path.normalize, often
 * enough for V8 to compile it with its optimising compiler at each start, which alone made the
 * process touch 5 MB more of the node binary.
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
