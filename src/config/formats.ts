/**
 * The files users already have — Claude Desktop, Cursor, Windsurf, Claude Code (`mcpServers`) and
 * VS Code (`servers`) — recognized by shape and turned into the native form, with a map from
 * native key paths back to the file's own keys so every error names what the operator wrote.
 * The `servers` ambiguity with native virtual servers is settled in
 * docs/decisions/002-config-formats.md.
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { closest } from '../common/suggest.ts'
import type { ConfigIssue, KeyPath } from './config-error.ts'
import { NAME_PATTERN } from './defaults.ts'

/** Formats a file on disk can be in. */
export type FileFormat = 'native' | 'claude' | 'vscode'

type Obj = Record<string, unknown>

const isObj = (value: unknown): value is Obj =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** Top-level keys only the native format has. */
const NATIVE_KEYS = ['upstreams', 'listen', 'security', 'limits', 'log']

/** Keys of a VS Code server entry, any of which marks an entry as a server rather than a group. */
const SERVER_ENTRY_KEYS = ['type', 'command', 'url']

/** Decides the format from the shape of the top-level value. */
export function detectFormat(value: unknown): { format: FileFormat } | { issue: ConfigIssue } {
  if (value === null || value === undefined) {
    return { issue: { path: [], message: 'the file is empty; define at least "upstreams"' } }
  }
  if (!isObj(value)) {
    return { issue: { path: [], message: 'expected a mapping of keys to values at the top level' } }
  }
  const native = NATIVE_KEYS.filter((key) => key in value)
  if ('mcpServers' in value) {
    if (native.length === 0) return { format: 'claude' }
    return {
      issue: {
        path: ['mcpServers'],
        message: `cannot be combined with Barbican's own keys (${native.join(', ')}); move these servers under "upstreams"`,
      },
    }
  }
  if (native.length > 0 || !isObj(value.servers)) return { format: 'native' }
  const entries = Object.entries(value.servers)
  const serverLike = entries.filter(
    ([, entry]) => isObj(entry) && SERVER_ENTRY_KEYS.some((key) => key in entry),
  )
  if (entries.length === 0) return { format: 'inputs' in value ? 'vscode' : 'native' }
  if (serverLike.length === entries.length) return { format: 'vscode' }
  if (serverLike.length === 0) return { format: 'native' }
  const odd = entries.find(([name]) => !serverLike.some(([other]) => other === name))?.[0]
  return {
    issue: {
      path: ['servers'],
      message: `mixes VS Code server entries ("${serverLike[0]?.[0]}" has type/command/url) with entries that are not ("${odd}"); a VS Code mcp.json needs "type", "command" or "url" in every entry`,
    },
  }
}

/** The part of a file Barbican reads; other top-level keys of foreign files become warnings. */
export function relevantPart(value: Obj, format: FileFormat, warnings: string[]): Obj {
  if (format === 'native') return value
  const container = format === 'claude' ? 'mcpServers' : 'servers'
  const ignored = Object.keys(value).filter((key) => key !== container && key !== 'inputs')
  if (ignored.length > 0) {
    warnings.push(`ignored top-level keys not about MCP servers: ${ignored.join(', ')}`)
  }
  return { [container]: value[container] }
}

/** A foreign file converted: the native value and the way back to the file's key paths. */
export interface Conversion {
  readonly native: Obj
  readonly issues: ConfigIssue[]
  mapPath(path: KeyPath): KeyPath
}

interface Origin {
  readonly name: string
  readonly keys: Record<string, string>
}

// `sandbox` is Barbican's own key, accepted in foreign files too (INTERFACE: Sandbox defaults).
const STDIO_KEYS = ['command', 'args', 'env', 'cwd', 'sandbox']
const REMOTE_KEYS = ['url', 'serverUrl', 'httpUrl', 'headers']
const TYPE_KEYS = ['type', 'transportType']

/** Type values seen in the wild, each mapped to a native transport ('stdio' for local servers). */
const TYPES: Record<string, string> = {
  stdio: 'stdio',
  http: 'streamable-http',
  'streamable-http': 'streamable-http',
  streamableHttp: 'streamable-http',
  sse: 'sse',
  ws: 'websocket',
  websocket: 'websocket',
}

/**
 * Converts an interpolated `mcpServers` or VS Code `servers` file. Unknown entry keys (such as
 * `autoApprove` or `disabled`) are warnings, not errors: these files are shared with other tools.
 */
export function convertForeign(
  value: Obj,
  format: 'claude' | 'vscode',
  options: { baseDir: string; warnings: string[] },
): Conversion {
  const container = format === 'claude' ? 'mcpServers' : 'servers'
  const issues: ConfigIssue[] = []
  const upstreams: Obj = {}
  const origins = new Map<string, Origin>()
  const entries = value[container]
  if (!isObj(entries)) {
    issues.push({ path: [container], message: 'expected a mapping of server names to servers' })
    return { native: { upstreams }, issues, mapPath: (path) => path }
  }
  for (const [original, entry] of Object.entries(entries)) {
    const name = safeName(original, origins)
    if (name !== original) {
      options.warnings.push(`${container}["${original}"] is served as upstream "${name}"`)
    }
    const keys: Record<string, string> = {}
    origins.set(name, { name: original, keys })
    if (!isObj(entry)) {
      upstreams[name] = entry
      continue
    }
    if (entry.disabled === true) {
      options.warnings.push(`${container}.${original} is disabled and was skipped`)
      origins.delete(name)
      continue
    }
    const known = [...STDIO_KEYS, ...REMOTE_KEYS, ...TYPE_KEYS, 'disabled', 'envFile']
    const unknown = Object.keys(entry).filter((key) => !known.includes(key))
    // A key one typo away from a known one (`comand`) is a mistake: it is passed on, so the
    // native validation reports it exactly as it would in barbican.yaml ("did you mean").
    // Anything else (`autoApprove`) belongs to another tool and is ignored.
    const misspelt = unknown.filter((key) => closest(key, known) !== undefined)
    const ignored = unknown.filter((key) => !misspelt.includes(key))
    if (ignored.length > 0) {
      options.warnings.push(`${container}.${original}: ignored ${ignored.join(', ')}`)
    }
    const typeKey = TYPE_KEYS.find((key) => key in entry)
    const typeValue = typeKey === undefined ? undefined : entry[typeKey]
    const mapped = typeof typeValue === 'string' ? TYPES[typeValue] : undefined
    if (typeKey !== undefined && mapped === undefined) {
      issues.push({
        path: [container, original, typeKey],
        message: `expected one of ${Object.keys(TYPES)
          .map((t) => `"${t}"`)
          .join(', ')}`,
      })
      continue
    }
    const out: Obj = {}
    for (const key of [...STDIO_KEYS, ...misspelt]) if (key in entry) out[key] = entry[key]
    const urlKey = REMOTE_KEYS.slice(0, 3).find((key) => key in entry)
    if (urlKey !== undefined) {
      out.url = entry[urlKey]
      keys.url = urlKey
      if ('headers' in entry) out.headers = entry.headers
      // VS Code's "http" tries Streamable HTTP and falls back to SSE, which is what auto does;
      // Gemini's httpUrl is Streamable HTTP by definition.
      let transport = mapped
      if (format === 'vscode' && typeValue === 'http') transport = 'auto'
      if (transport === undefined && urlKey === 'httpUrl') transport = 'streamable-http'
      if (transport === 'stdio') {
        issues.push({
          path: [container, original, typeKey ?? 'type'],
          message: 'is "stdio" but the entry has a url and no command',
        })
        continue
      }
      if (transport !== undefined) {
        out.transport = transport
        keys.transport = typeKey ?? 'type'
      }
    } else if (mapped !== undefined && mapped !== 'stdio') {
      issues.push({
        path: [container, original, typeKey ?? 'type'],
        message: `is "${String(typeValue)}", which needs a "url"`,
      })
      continue
    }
    if ('envFile' in entry && 'command' in out) {
      const env = readEnvFile(
        entry.envFile,
        options.baseDir,
        [container, original, 'envFile'],
        issues,
      )
      out.env = { ...env, ...(isObj(out.env) ? out.env : {}) }
    }
    upstreams[name] = out
  }
  const mapPath = (path: KeyPath): KeyPath => {
    if (path[0] !== 'upstreams') return path
    if (path.length === 1) return [container]
    const origin = origins.get(String(path[1]))
    if (!origin) return [container, ...path.slice(1)]
    if (path.length === 2) return [container, origin.name]
    const key = String(path[2])
    return [container, origin.name, origin.keys[key] ?? key, ...path.slice(3)]
  }
  return { native: { upstreams }, issues, mapPath }
}

/** Names from other tools may hold spaces or dots; ours become tool-name prefixes. */
function safeName(original: string, taken: Map<string, Origin>): string {
  let name = original
  if (!NAME_PATTERN.test(name) || name.includes('__')) {
    name = original
      .replace(/[^A-Za-z0-9_-]+/g, '-')
      .replace(/_{2,}/g, '_')
      .replace(/^[^A-Za-z0-9]+/, '')
      .replace(/-+$/, '')
      .slice(0, 64)
    if (name === '') name = 'server'
  }
  let candidate = name
  for (let n = 2; taken.has(candidate); n++) candidate = `${name.slice(0, 60)}-${n}`
  return candidate
}

/** Reads a dotenv file (KEY=VALUE lines, `#` comments, optional quotes), as VS Code does. */
function readEnvFile(file: unknown, baseDir: string, path: KeyPath, issues: ConfigIssue[]): Obj {
  if (typeof file !== 'string') {
    issues.push({ path, message: 'expected a path to a .env file' })
    return {}
  }
  let text: string
  try {
    text = readFileSync(resolve(baseDir, file), 'utf8')
  } catch (err) {
    issues.push({
      path,
      message: `cannot read ${resolve(baseDir, file)}: ${(err as Error).message}`,
    })
    return {}
  }
  const env: Obj = {}
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*$/.exec(line)
    if (!match?.[1]) continue
    let raw = match[2] ?? ''
    const quoted = /^(['"])(.*)\1$/.exec(raw)
    if (quoted)
      raw = quoted[1] === '"' ? (quoted[2] ?? '').replace(/\\n/g, '\n') : (quoted[2] ?? '')
    else raw = raw.replace(/\s+#.*$/, '')
    env[match[1]] = raw
  }
  return env
}
