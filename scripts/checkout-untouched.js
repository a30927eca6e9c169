// Runs a test tier (the command after `--`) and fails if it left anything new in the checkout:
// a file git does not track, ignored ones included (a `.barbican/` state folder, a `*.db`).
// Tests write into temporary directories only; one that writes into the checkout makes the next
// run depend on what the last one left there (issue 32: the demo's `.barbican/` in the root
// made the sandbox refuse the test fixtures). Outside a git checkout it only runs the command.
import { execFileSync, spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'

const args = process.argv.slice(2)
const command = args[0] === '--' ? args.slice(1) : args
if (command.length === 0) {
  console.error('usage: node scripts/checkout-untouched.js -- COMMAND [ARG…]')
  process.exit(2)
}

/**
 * Every untracked or ignored path, as `git status` names them, and every name in the root (git
 * does not list an empty folder); undefined outside a checkout.
 */
function untracked() {
  try {
    const out = execFileSync(
      'git',
      ['status', '--porcelain=v1', '-z', '--ignored', '--untracked-files=normal'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * 1024 * 1024 },
    )
    const paths = out
      .split('\0')
      .filter((entry) => entry.startsWith('?? ') || entry.startsWith('!! '))
      .map((entry) => entry.slice(3))
    return new Set(
      [...paths, ...readdirSync('.').map((name) => `${name} (in the root)`)]
        // node_modules and the set-up's cache are the install's, not a test's.
        .filter((path) => !/^(node_modules|\.cache)(\/|$| )/.test(path)),
    )
  } catch {
    return undefined
  }
}

const before = untracked()
const child = spawn(command[0], command.slice(1), { stdio: 'inherit' })
// Ctrl-C reaches the child through the terminal's process group; wait for it to finish.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal))
child.on('exit', (code, signal) => {
  const after = untracked()
  const added = before && after ? [...after].filter((path) => !before.has(path)) : []
  if (added.length > 0) {
    const shown = added.slice(0, 20).map((path) => `  ${path}`)
    if (added.length > shown.length) shown.push(`  … and ${added.length - shown.length} more`)
    console.error(
      `\nThe tests left ${added.length} new file(s) in the checkout; a test must write only ` +
        `into a temporary directory:\n${shown.join('\n')}`,
    )
    process.exit(1)
  }
  process.exit(code ?? (signal === null ? 1 : 128))
})
