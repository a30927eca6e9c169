// Compiles src/ to dist/ (tsconfig.build.json) and stamps the build with the time it started.
// bin/barbican.js runs dist/ only when no source file is newer than that stamp, so a stale build
// is never run. Also the `prepare` step of `npm install`: a failed build must not fail the
// install, so it only warns and leaves no stamp (the command then runs the sources).
import { spawnSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const stamp = new URL('../dist/.build-started', import.meta.url)
const strict = process.argv.includes('--strict')
// Taken before tsc reads anything: an edit made while it runs leaves the source newer.
const started = Date.now()
rmSync(stamp, { force: true })
const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url))
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
  cwd: root,
  stdio: 'inherit',
})
if (result.status !== 0) {
  process.stderr.write(
    'barbican build: tsc failed; dist/ is not stamped, so bin/barbican.js runs the sources.\n',
  )
  process.exit(strict ? 1 : 0)
}
mkdirSync(new URL('../dist/', import.meta.url), { recursive: true })
writeFileSync(stamp, `${started}\n`)
