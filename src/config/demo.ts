/**
 * The embedded demo: what `barbican serve` runs when no config file exists, so a new user sees a
 * working gateway at once. It aggregates the official reference servers installed with Barbican,
 * launched with the running Node and their resolved entry files, so it needs neither network nor
 * `npx` and behaves the same offline.
 */
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import type { LoadedConfig } from './config.ts'
import { ConfigError } from './config-error.ts'
import { demoDataDir, demoStorePath } from './demo-paths.ts'
import { normalizeConfig } from './normalize.ts'
import { runsAsRoot, sandboxUid } from './sandbox-spec.ts'
import type { NativeConfigInput } from './schema.ts'

export { demoDataDir, demoStorePath }

/** Options for the demo; both have working defaults. */
export interface DemoOptions {
  /** `HOST:PORT` replacing the default 127.0.0.1:7300. */
  readonly listen?: string | undefined
  /** Where the demo writes: memory graph, files, store, audit. Default: `demoDataDir()`. */
  readonly dataDir?: string
}

const require = createRequire(import.meta.url)

/**
 * Resolves the entry file of an installed package's command (its package.json `bin`), or
 * undefined when the package is not installed.
 */
export function resolvePackageBin(packageName: string): string | undefined {
  let manifestPath: string
  try {
    manifestPath = require.resolve(`${packageName}/package.json`)
  } catch {
    return undefined
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { bin?: unknown }
  const bin =
    typeof manifest.bin === 'string'
      ? manifest.bin
      : typeof manifest.bin === 'object' && manifest.bin !== null
        ? Object.values(manifest.bin).find((value) => typeof value === 'string')
        : undefined
  if (typeof bin !== 'string') return undefined
  const entry = resolve(dirname(manifestPath), bin)
  return existsSync(entry) ? entry : undefined
}

/**
 * Builds the demo configuration: `everything` (every MCP feature), `memory` (a knowledge graph)
 * and `files` (a filesystem server confined to a demo folder), namespaced as `everything__echo`
 * and so on. Servers whose package is missing are left out with a warning.
 */
export function demoConfig(options: DemoOptions = {}): LoadedConfig {
  const dataDir = options.dataDir ?? demoDataDir()
  const filesDir = join(dataDir, 'files')
  const warnings: string[] = []
  const upstreams: NonNullable<NativeConfigInput['upstreams']> = {}

  const everything = resolvePackageBin('@modelcontextprotocol/server-everything')
  if (everything) upstreams.everything = { command: process.execPath, args: [everything, 'stdio'] }

  const stateRoot = join(dataDir, 'state')
  const memory = resolvePackageBin('@modelcontextprotocol/server-memory')
  if (memory) {
    // The server's default file sits beside its code, inside node_modules (read-only in its
    // sandbox): keep the graph in its state directory, which persists across restarts.
    upstreams.memory = {
      command: process.execPath,
      args: [memory],
      env: { MEMORY_FILE_PATH: join(stateRoot, 'memory', 'memory.jsonl') },
    }
  }

  const filesystem = resolvePackageBin('@modelcontextprotocol/server-filesystem')
  if (filesystem) {
    mkdirSync(filesDir, { recursive: true })
    const welcome = join(filesDir, 'welcome.md')
    if (!existsSync(welcome)) {
      writeFileSync(
        welcome,
        '# Barbican demo\n\nThis folder is served by the `files` upstream of the demo gateway.\n',
      )
    }
    // A root gateway runs each server as its own unprivileged uid: the demo folder is the
    // files server's to write.
    if (runsAsRoot()) {
      const uid = sandboxUid('files')
      for (const path of [filesDir, welcome]) chownSync(path, uid, uid)
    }
    upstreams.files = { command: process.execPath, args: [filesystem, filesDir] }
  }

  for (const [name, pkg] of [
    ['everything', 'server-everything'],
    ['memory', 'server-memory'],
    ['files', 'server-filesystem'],
  ] as const) {
    if (!(name in upstreams)) {
      warnings.push(
        `demo upstream "${name}" left out: @modelcontextprotocol/${pkg} is not installed`,
      )
    }
  }
  if (Object.keys(upstreams).length === 0) {
    throw new ConfigError([
      {
        path: [],
        message:
          'no config file found and the demo servers (@modelcontextprotocol/server-everything, ' +
          'server-memory, server-filesystem) are not installed; run npm install in the checkout ' +
          'or pass --config FILE',
      },
    ])
  }
  mkdirSync(dataDir, { recursive: true })
  // The store (and the audit log beside it) in the data folder, not `.barbican/` in the working
  // directory: a checkout stays clean, and `barbican audit` finds the log from anywhere.
  const config = normalizeConfig(
    { upstreams, store: { sqlite: { path: demoStorePath(dataDir) } } },
    { listen: options.listen, stateRoot, baseDir: dataDir },
  )
  return { config, source: { path: undefined, format: 'demo' }, warnings }
}
