/**
 * What a test does to share a folder with a confined upstream, as an operator would
 * (docs/sandbox.md): when Barbican runs as root, each upstream runs as its own unprivileged uid,
 * so a folder it must write is handed to that uid.
 */
import { chownSync } from 'node:fs'
import { runsAsRoot, sandboxUid } from '../../src/sandbox/sandbox.ts'

/** Gives `paths` to the uid upstream `name` runs as (nothing to do without root). */
export function grantTo(name: string, ...paths: string[]): void {
  if (!runsAsRoot()) return
  const uid = sandboxUid(name)
  for (const path of paths) chownSync(path, uid, uid)
}
