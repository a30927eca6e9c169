/**
 * What a confined `npx` launch runs instead (docs/sandbox.md): a sandbox has no network, so the
 * package is found where it was installed outside it (node_modules above the working directory,
 * or the npx cache, as the lockfile check finds it) and its bin entry is run directly with
 * Barbican's Node. Only the plain form `npx [-y|--yes] PACKAGE[@VERSION] [ARGS…]` is rewritten;
 * any other npx command line is left as written.
 */
import { existsSync, readFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import { splitNpmSpec } from './launch.ts'
import { findNpmPackage, type LaunchContext } from './lockfile.ts'

export interface CommandLine {
  readonly command: string
  readonly args: readonly string[]
}

/** The installed bin entry for a plain npx command line; undefined for anything else. */
export function installedLaunch(
  upstream: string,
  line: CommandLine,
  ctx: LaunchContext,
): CommandLine | undefined {
  if (basename(line.command).replace(/\.cmd$/i, '') !== 'npx') return undefined
  let i = 0
  while (line.args[i] === '-y' || line.args[i] === '--yes') i++
  const spec = line.args[i]
  if (spec === undefined || spec.startsWith('-')) return undefined
  const { name, version } = splitNpmSpec(spec)
  const dir = findNpmPackage(name, version, ctx)
  const refuse = (why: string): never => {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `upstream "${upstream}": ${spec} ${why}; a confined server has no network to install it. ` +
        `Install it first (npm install ${spec}), or set sandbox: none`,
    )
  }
  if (dir === undefined) return refuse('is not installed')
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    version?: string
    bin?: string | Record<string, string>
  }
  if (version !== undefined && manifest.version !== version.replace(/^v/, '')) {
    return refuse(`is installed as ${manifest.version}`)
  }
  const bins = typeof manifest.bin === 'string' ? { [basename(name)]: manifest.bin } : manifest.bin
  const entry = bins?.[basename(name)] ?? Object.values(bins ?? {})[0]
  if (entry === undefined || !existsSync(resolve(dir, entry))) return refuse('has no bin entry')
  return { command: process.execPath, args: [resolve(dir, entry), ...line.args.slice(i + 1)] }
}
