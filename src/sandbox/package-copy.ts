/**
 * The writable install folder of a package run under the Node.js permission model (ADR 097).
 * Bubblewrap can lay a writable layer over a read-only install; this model cannot, and a server
 * such as server-memory writes next to its own code (its default `memory.jsonl`). So the package
 * is copied, once, into the upstream's state directory and run from there: its writes land in
 * the copy, persist across restarts, and never touch the shared install.
 *
 * Only the package's own folder is copied. Its dependencies stay where they were installed: the
 * copy's `node_modules` holds a symlink to each other entry of the install's `node_modules`, and
 * Node loads a module from its real path, which is granted read-only.
 */
import { createHash } from 'node:crypto'
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs'
import { dirname, join, relative, sep } from 'node:path'

/** Where the copies of a state directory live. */
export const PACKAGE_COPY_DIR = '.package'

export interface PackageCopy {
  /** The script to run instead: the same file in the copy. */
  readonly script: string
  /** The install's `node_modules`, where the copy's dependencies resolve (read-only). */
  readonly installed: string
  /** The copied package folder (inside the state directory, so writable). */
  readonly folder: string
}

/**
 * Copies the installed package that holds `script` (a real path) into `stateDir` unless a copy
 * is there already, and returns where to run it from. Undefined when `script` is not in a
 * package directly under a `node_modules` (a project's own code, a nested dependency), or is
 * inside the state directory already.
 */
export function packageCopy(script: string, stateDir: string): PackageCopy | undefined {
  if (script.startsWith(stateDir + sep)) return undefined
  const parts = script.split(sep)
  const at = parts.indexOf('node_modules')
  // A nested dependency resolves through several node_modules: too many to mirror.
  if (at < 0 || parts.lastIndexOf('node_modules') !== at) return undefined
  const name = parts.slice(at + 1, at + (parts[at + 1]?.startsWith('@') ? 3 : 2))
  const installed = parts.slice(0, at + 1).join(sep)
  const source = join(installed, ...name)
  if (name.length === 0 || !existsSync(join(source, 'package.json'))) return undefined
  const { version } = JSON.parse(readFileSync(join(source, 'package.json'), 'utf8')) as {
    version?: string
  }
  // One copy per install and version: another install of the same version is another copy.
  const where = createHash('sha256').update(source).digest('hex').slice(0, 12)
  const root = join(stateDir, PACKAGE_COPY_DIR, `${name.join('+')}@${version ?? '0'}-${where}`)
  const modules = join(root, 'node_modules')
  const folder = join(modules, ...name)
  if (!existsSync(join(folder, 'package.json'))) {
    mkdirSync(dirname(folder), { recursive: true })
    // Copied aside and renamed into place, so an interrupted copy is never taken for a copy.
    const partial = `${folder}.partial-${process.pid}`
    rmSync(partial, { recursive: true, force: true })
    cpSync(source, partial, { recursive: true, verbatimSymlinks: true })
    renameSync(partial, folder)
  }
  linkSiblings(installed, modules, name)
  return { script: join(folder, relative(source, script)), installed, folder }
}

/**
 * Links every entry of the install's `node_modules` but the copied package into the copy's,
 * adding what was installed since the last launch; existing links are left as they are.
 */
function linkSiblings(installed: string, modules: string, name: readonly string[]): void {
  const link = (target: string, path: string) => {
    if (!exists(path)) symlinkSync(target, path)
  }
  for (const entry of readdirSync(installed)) {
    if (entry === name[0] && name.length === 1) continue
    if (entry === name[0]) {
      for (const inner of readdirSync(join(installed, entry))) {
        if (inner !== name[1]) link(join(installed, entry, inner), join(modules, entry, inner))
      }
    } else link(join(installed, entry), join(modules, entry))
  }
}

/** Whether `path` exists as itself (a dangling symlink counts). */
function exists(path: string): boolean {
  try {
    lstatSync(path)
    return true
  } catch {
    return false
  }
}
