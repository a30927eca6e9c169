/** Finding the programs a sandbox needs (bwrap, prlimit, socat, perl …) on the host. */
import { accessSync, constants, statSync } from 'node:fs'
import { delimiter, join } from 'node:path'

const SYSTEM_BIN = ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin']

/** Finds an executable on PATH (or the system folders), or undefined. */
export function findExecutable(
  name: string,
  path: string | undefined = process.env.PATH,
): string | undefined {
  const dirs = [...(path ?? '').split(delimiter).filter((d) => d !== ''), ...SYSTEM_BIN]
  for (const dir of dirs) {
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      if (statSync(candidate).isFile()) return candidate
    } catch {
      // Not here.
    }
  }
  return undefined
}
