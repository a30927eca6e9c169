/**
 * The writable layer of a confined package (ADR 095): many servers keep state beside their own
 * code (server-memory's default `dist/memory.jsonl`), and a package installed for every upstream
 * (Barbican's npm cache, a project's node_modules) must never be written by one of them. So each
 * confined upstream gets its own copy of the package's folder in its state directory, which the
 * sandbox mounts read-write over the installed folder: the server writes where it was installed,
 * its writes survive restarts, and the shared install is untouched.
 *
 * The copy is kept in step like an overlay whose lower layer may change: at each launch, a file
 * of the install that changed since the last launch (size or modification time) is copied again
 * (an upgrade in place wins), a file the server changed while the install did not is kept, and
 * files only the server made are never removed. The package's own `node_modules` is not copied;
 * the sandbox mounts it read-only inside the copy. bubblewrap 0.9's `--overlay` would do this in
 * the kernel; the hosts Barbican targets ship 0.8, which lacks it.
 */
import { createHash } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { basename, dirname, join, relative, sep } from 'node:path'

/** A package folder with more than this many files is left read-only (it is not a package). */
export const LAYER_MAX_FILES = 5000
/** …or more bytes than this. */
export const LAYER_MAX_BYTES = 64 * 1024 ** 2

/** The installed folder of the package `file` belongs to, when it lies in a node_modules. */
export function installFolderOf(file: string): string | undefined {
  const parts = file.split(sep)
  const modules = parts.lastIndexOf('node_modules')
  if (modules < 0) return undefined
  // The nearest folder with a package.json between the file and its node_modules.
  for (let end = parts.length - 1; end > modules + 1; end--) {
    const dir = parts.slice(0, end).join(sep)
    if (existsSync(join(dir, 'package.json'))) return dir
  }
  return undefined
}

/** One file of an install as last seen: size and modification time. */
type Seen = Record<string, readonly [size: number, mtimeMs: number]>

interface Entry {
  readonly path: string
  readonly kind: 'file' | 'dir' | 'link'
  readonly size: number
  readonly mtimeMs: number
}

/** The entries of `root` (not its top-level node_modules), or undefined past the limits. */
function walk(root: string): Entry[] | undefined {
  const entries: Entry[] = []
  let bytes = 0
  const visit = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name)
      if (dir === root && name === 'node_modules') continue
      const stat = lstatSync(path)
      const rel = relative(root, path)
      if (stat.isDirectory()) {
        entries.push({ path: rel, kind: 'dir', size: 0, mtimeMs: 0 })
        visit(path)
      } else if (stat.isSymbolicLink() || stat.isFile()) {
        const kind = stat.isFile() ? 'file' : 'link'
        entries.push({ path: rel, kind, size: stat.size, mtimeMs: stat.mtimeMs })
        bytes += stat.size
      }
      if (entries.length > LAYER_MAX_FILES || bytes > LAYER_MAX_BYTES) throw new TooBig()
    }
  }
  try {
    visit(root)
  } catch (err) {
    if (err instanceof TooBig) return undefined
    throw err
  }
  return entries
}

class TooBig extends Error {}

/** Where the layer of `installed` lives in `stateDir`: a readable name and a hash of the path. */
export function layerPath(stateDir: string, installed: string): string {
  const hash = createHash('sha256').update(installed).digest('hex').slice(0, 12)
  return join(stateDir, '.barbican-packages', `${basename(installed)}-${hash}`)
}

/**
 * Brings the layer of `installed` in step (see the module comment) and returns its folder, or
 * undefined when the folder is too large to be a package (then it stays read-only). `owner`:
 * the uid that must own what is copied (the sandbox uid of a root gateway).
 */
export function syncPackageLayer(
  stateDir: string,
  installed: string,
  owner?: number,
): string | undefined {
  const entries = walk(installed)
  if (entries === undefined) return undefined
  const layer = layerPath(stateDir, installed)
  const seenFile = `${layer}.seen.json`
  let seen: Seen = {}
  try {
    seen = JSON.parse(readFileSync(seenFile, 'utf8')) as Seen
  } catch {
    // First launch, or a lost record: every file of the install is copied.
  }
  const own = (path: string) => {
    if (owner !== undefined) lchownSync(path, owner, owner)
  }
  // The state directory is the server's to write: whatever it put in place of a folder of the
  // layer (a link to /etc, say) is removed before Barbican writes through it.
  realFolder(dirname(layer))
  if (realFolder(layer)) seen = {}
  own(layer)
  const next: Seen = {}
  for (const entry of entries) {
    const source = join(installed, entry.path)
    const target = join(layer, entry.path)
    if (entry.kind === 'dir') {
      if (realFolder(target, lstatSync(source).mode & 0o777)) own(target)
      continue
    }
    next[entry.path] = [entry.size, entry.mtimeMs]
    const before = seen[entry.path]
    if (before !== undefined && before[0] === entry.size && before[1] === entry.mtimeMs) continue
    rmSync(target, { force: true, recursive: true })
    if (entry.kind === 'link') symlinkSync(readlinkSync(source), target)
    else copyFileSync(source, target)
    own(target)
  }
  rmSync(seenFile, { force: true, recursive: true })
  writeFileSync(seenFile, JSON.stringify(next), { flag: 'wx' })
  return layer
}

/** Makes `dir` a real folder (removing a link or file in its place); true when it was made. */
function realFolder(dir: string, mode = 0o755): boolean {
  let stat: ReturnType<typeof lstatSync> | undefined
  try {
    stat = lstatSync(dir)
  } catch {
    stat = undefined
  }
  if (stat?.isDirectory()) return false
  if (stat !== undefined) rmSync(dir, { force: true, recursive: true })
  mkdirSync(dir, { mode })
  return true
}
