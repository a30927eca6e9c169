/**
 * Barbican's own version, read from the package.json of the installed package. The nearest
 * package.json above this module is the package's own, whether it runs from src/common/ in a
 * checkout or from dist/main.js in a checkout or an installed tarball.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const candidate = join(dir, 'package.json')
    if (existsSync(candidate)) {
      return (JSON.parse(readFileSync(candidate, 'utf8')) as { version: string }).version
    }
    const parent = dirname(dir)
    if (parent === dir) return '0.0.0-unknown'
    dir = parent
  }
}

export const VERSION: string = packageVersion()
