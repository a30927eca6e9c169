/**
 * The file view of a bubblewrap sandbox as bwrap arguments (docs/sandbox.md): the system's
 * read-only folders, a private /tmp, the folders sandbox.ts's `sandboxView` decided, each
 * package's writable layer (ADR 095), recreated symlinks and masks.
 */
import { existsSync, realpathSync, statSync } from 'node:fs'
import { dirname, join, resolve, sep } from 'node:path'
import { within } from '../common/paths.ts'
import { installFolderOf, syncPackageLayer } from './package-layer.ts'

export const SYSTEM_DIRS = ['/usr', '/etc', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']

/** Every folder above `paths` (not `/`, not the system folders), parents first. */
export function ancestorsOf(paths: readonly string[]): string[] {
  const found = new Set<string>()
  for (const path of paths) {
    for (let dir = dirname(path); dir !== dirname(dir); dir = dirname(dir)) {
      if (!SYSTEM_DIRS.some((s) => within(dir, s)) && dir !== '/tmp') found.add(dir)
    }
  }
  return [...found].sort((a, b) => a.split(sep).length - b.split(sep).length)
}

export function realOrNull(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}

/** The bind mounts of one sandbox, before they become bwrap arguments. */
export interface SandboxView {
  readonly readOnly: readonly string[]
  readonly readWrite: readonly string[]
  readonly masked: readonly string[]
  /** Symlinks recreated inside, outside the system folders. */
  readonly links: ReadonlyArray<readonly [string, string]>
}

/** A package's writable layer: the copy in the state directory, mounted over its install. */
export interface Layer {
  readonly installed: string
  readonly copy: string
}

/**
 * The writable layers of the packages `launch` runs (ADR 095): the command's and each script
 * argument's package, when it lies in a node_modules. Brought in step with the install here.
 */
export function layersOf(
  launch: { readonly args: readonly string[]; readonly cwd?: string | undefined },
  resolved: string,
  stateDir: string,
  owner?: number,
): Layer[] {
  const cwd = launch.cwd ?? process.cwd()
  const files = [resolved]
  for (const arg of launch.args) {
    if (arg.startsWith('-') || arg.includes('\n') || !arg.includes('/')) continue
    const real = realOrNull(resolve(cwd, arg))
    if (real !== undefined && statSync(real).isFile()) files.push(real)
  }
  const installs = new Set(files.flatMap((file) => installFolderOf(file) ?? []))
  return [...installs].flatMap((installed) => {
    const copy = syncPackageLayer(stateDir, installed, owner)
    return copy === undefined ? [] : [{ installed, copy }]
  })
}

/**
 * The bwrap arguments of the file view: system folders, a private /tmp, the bound folders, the
 * packages' writable layers, recreated symlinks and masks. A granted path under /tmp is bound
 * after the private /tmp, so it is the host's (issue 29).
 *
 * Mounts are made parents first, so a folder bound inside a granted one (a package inside a
 * project, the state directory inside a project's `.barbican/`) stays visible instead of being
 * covered by its parent's bind; masks come after every bind they cover, and the binds inside a
 * masked folder (the server's own state directory inside `.barbican/`) after the mask.
 * `sources`: where a bind's source differs from its place inside (a root-owned grant's idmapped
 * clone, ADR 096).
 */
export function fileViewArgs(
  view: SandboxView,
  layers: readonly Layer[],
  sources: ReadonlyMap<string, string> = new Map(),
): string[] {
  const args: string[] = []
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue
    const real = realpathSync(dir)
    if (real !== dir) args.push('--symlink', real.replace(/^\//, ''), dir)
    else args.push('--ro-bind', dir, dir)
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp')
  // bwrap makes missing parent folders 0700 (root's), which the sandbox uid could not cross.
  const targets = [...view.readOnly, ...view.readWrite, ...view.links.map(([link]) => link)]
  for (const dir of ancestorsOf(targets)) args.push('--perms', '0755', '--dir', dir)
  const binds: Array<readonly [string, string, string]> = []
  for (const dir of view.readOnly) binds.push(['--ro-bind-try', dir, dir])
  for (const layer of layers) {
    binds.push(['--bind', layer.copy, layer.installed])
    // The package's own dependencies stay the install's, read-only.
    const modules = join(layer.installed, 'node_modules')
    if (existsSync(modules)) binds.push(['--ro-bind', modules, modules])
  }
  for (const dir of view.readWrite) binds.push(['--bind-try', sources.get(dir) ?? dir, dir])
  // A stable sort: at equal depth, a package's read-only root comes before its writable layer.
  binds.sort((a, b) => depth(a[2]) - depth(b[2]))
  const masked = [...view.masked].sort((a, b) => depth(a) - depth(b))
  const inMask = (dest: string) => masked.some((mask) => within(dest, mask) && dest !== mask)
  for (const [flag, source, dest] of binds) if (!inMask(dest)) args.push(flag, source, dest)
  for (const path of masked) {
    if (statSync(path).isDirectory()) args.push('--tmpfs', path)
    else args.push('--ro-bind', '/dev/null', path)
  }
  for (const [flag, source, dest] of binds) if (inMask(dest)) args.push(flag, source, dest)
  for (const [link, target] of view.links) args.push('--symlink', target, link)
  return args
}

function depth(path: string): number {
  return path.split(sep).length
}
