/**
 * From a native config value (already interpolated) to the fully defaulted `Config`: validates
 * with the schema and the cross-key checks together, then resolves every default and every
 * `auto` so consumers never see an unresolved choice.
 */
import { homedir, tmpdir } from 'node:os'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { AUDIT_CHECKPOINTS_PUBLISH_ENV, AUDIT_JOURNAL_DIR_ENV } from './audit-schema.ts'
import type { AuthConfig } from './auth-schema.ts'
import {
  DEFAULT_REDIS_PREFIX,
  envUrlIssue,
  POSTGRES_SCHEMES,
  POSTGRES_URL_ENV,
  REDIS_SCHEMES,
  REDIS_URL_ENV,
  type RedisConfig,
} from './backends.ts'
import type {
  AuditConfig,
  Config,
  ListenAddress,
  SecurityConfig,
  StoreConfig,
  UpstreamConfig,
  VirtualServerConfig,
} from './config.ts'
import { ConfigError, type ConfigIssue } from './config-error.ts'
import { crossCheck } from './cross-check.ts'
import {
  CODE_DEFAULTS,
  DEFAULT_ALLOWED_HOSTS,
  DEFAULT_NAMES_BUDGET,
  DEFAULT_PACKAGE_CACHE_NAME,
  DEFAULT_QUOTA_LEASE_MS,
  DEFAULT_SEPARATOR,
  DEFAULT_STATE_ROOT,
  DEFAULT_STORE_PATH,
  LOOPBACK_ORIGINS,
} from './defaults.ts'
import { DEFAULT_LISTEN, hostForHeader, isWildcardHost, parseListen } from './listen.ts'
import { inferGrants } from './sandbox-grants.ts'
import {
  DEFAULT_SANDBOX_LIMIT_SETTINGS,
  type SandboxSpec,
  sandboxLimitsOf,
} from './sandbox-spec.ts'
import { type NativeConfig, nativeConfigSchema } from './schema.ts'
import { issuesFromZod } from './zod-issues.ts'

/** Options that complete what a config value alone cannot say. */
export interface NormalizeOptions {
  /** Directory relative `cwd` values resolve against (the config file's). Default: process cwd. */
  readonly baseDir?: string
  /** `HOST:PORT` that replaces the file's `listen` (the CLI's `--listen`). */
  readonly listen?: string | undefined
  /** The config file, masked inside every sandbox (absent for text without a file). */
  readonly configPath?: string | undefined
  /**
   * Where state directories go by default (the demo's data folder). Default: `.barbican/state`
   * in `baseDir`; without a `baseDir` (a config built in code), in the temp directory.
   */
  readonly stateRoot?: string | undefined
  /**
   * Where BARBICAN_POSTGRES_URL, BARBICAN_REDIS_URL and BARBICAN_AUDIT_JOURNAL_DIR are read.
   * Default: none.
   */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
}

/** Validation outcome: the defaulted native value, or every issue found. */
export type Validation =
  | { readonly ok: true; readonly value: NativeConfig }
  | { readonly ok: false; readonly issues: ConfigIssue[] }

/** Runs the schema and the cross-key checks and returns all their issues together. */
export function validateNative(input: unknown): Validation {
  const parsed = nativeConfigSchema.safeParse(input, { reportInput: true })
  const cross = crossCheck(input)
  const schemaIssues = parsed.success
    ? []
    : issuesFromZod(parsed.error.issues, input, nativeConfigSchema).filter(
        (issue) => !cross.supersedes.has(JSON.stringify(issue.path)),
      )
  const issues = [...schemaIssues, ...cross.issues]
  if (issues.length > 0 || !parsed.success) return { ok: false, issues }
  return { ok: true, value: parsed.data }
}

/**
 * Validates and normalizes a native config value; throws ConfigError (ERR_CONFIG_INVALID) with
 * every issue. Useful in code and tests that build a gateway without a file.
 */
export function normalizeConfig(input: unknown, options: NormalizeOptions = {}): Config {
  const result = validateNative(input)
  if (!result.ok) throw new ConfigError(result.issues)
  return buildConfig(result.value, options)
}

/** Applies defaults to an already validated native value. */
export function buildConfig(native: NativeConfig, options: NormalizeOptions = {}): Config {
  const listen = resolveListen(native.listen, options.listen)
  const limits = { ...native.limits }
  const upstreams = Object.entries(native.upstreams).map(([name, entry]) =>
    resolveUpstream(name, entry, native, options),
  )
  const allNames = upstreams.map((u) => u.name)
  const declared = native.servers ?? { default: {} as Partial<ServerInput> }
  const servers = Object.entries(declared).map(([name, server]) =>
    resolveServer(name, server, allNames),
  )
  const backends = backendsOf(native, options)
  const tenants = resolveTenants(native, options)
  return deepFreeze({
    listen,
    security: resolveSecurity(native.security, listen),
    limits,
    log: { ...native.log },
    metrics: native.metrics,
    upstreams,
    servers,
    ...(native.tenants === undefined ? {} : { tenants }),
    ...backends,
    audit: resolveAudit(native.audit, options),
    ...(native.auth === undefined
      ? {}
      : { auth: tokensInStore(resolveAuthPaths(native.auth, options.baseDir), backends.store) }),
    ...(native.rateLimits === undefined
      ? {}
      : { rateLimits: Object.entries(native.rateLimits).map(([name, r]) => ({ name, ...r })) }),
    ...(native.guards === undefined ? {} : { guards: native.guards }),
    ...(native.confirm === undefined ? {} : { confirm: native.confirm }),
    ...(native.contexts === undefined ? {} : { contexts: native.contexts }),
    ...(native.cedar === undefined
      ? {}
      : {
          cedar: {
            mode: native.cedar.mode,
            policies: native.cedar.policies.map((path) =>
              isAbsolute(path) ? path : resolve(options.baseDir ?? process.cwd(), path),
            ),
          },
        }),
  })
}

/** One upstream entry, with its timeout, paths and (for stdio) sandbox resolved. */
function resolveUpstream(
  name: string,
  entry: NativeConfig['upstreams'][string],
  native: NativeConfig,
  options: NormalizeOptions,
): UpstreamConfig {
  const requestTimeoutMs = entry.requestTimeoutMs ?? native.limits.upstreamRequestTimeoutMs
  if ('command' in entry) {
    return {
      name,
      transport: 'stdio',
      command: entry.command,
      args: entry.args,
      env: entry.env,
      ...(entry.cwd === undefined
        ? {}
        : {
            cwd: isAbsolute(entry.cwd)
              ? entry.cwd
              : resolve(options.baseDir ?? process.cwd(), entry.cwd),
          }),
      lazy: entry.lazy,
      idleTimeoutMs: entry.idleTimeoutMs,
      requestTimeoutMs,
      ...(entry.sessions === undefined ? {} : { sessions: entry.sessions }),
      ...(entry.trust === undefined ? {} : { trust: entry.trust }),
      ...(entry.credentials === undefined ? {} : { credentials: entry.credentials }),
      sandbox: resolveSandbox(name, entry, native, options),
    }
  }
  if ('wasm' in entry) {
    const base = options.baseDir ?? process.cwd()
    const local = (path: string) => (isAbsolute(path) ? path : resolve(base, path))
    return {
      name,
      transport: 'wasm',
      source: /^https:\/\//i.test(entry.wasm) ? entry.wasm : local(entry.wasm),
      allowedHosts: entry.allowedHosts,
      allowedPaths: Object.fromEntries(
        Object.entries(entry.allowedPaths).map(([host, guest]) => [local(host), guest]),
      ),
      config: entry.config,
      maxMemoryMb: entry.maxMemoryMb,
      maxModuleBytes: entry.maxModuleBytes,
      requestTimeoutMs,
      ...(entry.trust === undefined ? {} : { trust: entry.trust }),
    }
  }
  // WebSocket is the only transport a ws:// URL can mean, so `auto` resolves here.
  const transport =
    entry.transport === 'auto' && /^wss?:/i.test(entry.url) ? 'websocket' : entry.transport
  return {
    name,
    transport,
    url: entry.url,
    headers: entry.headers,
    requestTimeoutMs,
    ...(entry.sessions === undefined ? {} : { sessions: entry.sessions }),
    ...(entry.trust === undefined ? {} : { trust: entry.trust }),
    ...(entry.credentials === undefined ? {} : { credentials: entry.credentials }),
  }
}

/** One virtual server, every default and `auto` resolved; `allNames` when it names no upstreams. */
function resolveServer(
  name: string,
  server: Partial<ServerInput>,
  allNames: readonly string[],
): VirtualServerConfig {
  const members = server.upstreams ?? allNames
  const mode = server.namespacing?.mode ?? 'auto'
  return {
    name,
    path: name === 'default' ? '/mcp' : `/mcp/${name}`,
    upstreams: members,
    namespacing: {
      mode: mode === 'auto' ? (members.length > 1 ? 'always' : 'never') : mode,
      separator: server.namespacing?.separator ?? DEFAULT_SEPARATOR,
    },
    tools: {
      include: server.tools?.include,
      exclude: server.tools?.exclude ?? [],
      rename: server.tools?.rename ?? {},
      descriptions: server.tools?.descriptions ?? {},
    },
    prompts: {
      include: server.prompts?.include,
      exclude: server.prompts?.exclude ?? [],
      rename: server.prompts?.rename ?? {},
    },
    resources: { include: server.resources?.include, exclude: server.resources?.exclude ?? [] },
    exposure: {
      mode: server.tools?.mode ?? 'all',
      pinned: server.tools?.pinned ?? [],
      namesBudget: server.tools?.search?.namesBudget ?? DEFAULT_NAMES_BUDGET,
      ...(server.adapt === undefined ? {} : { adapt: server.adapt }),
      code: { ...CODE_DEFAULTS, ...server.code },
    },
    ...(server.tokenBudget === undefined ? {} : { tokenBudget: server.tokenBudget }),
  }
}

/** Each tenant's upstreams and servers, built exactly as the top-level ones are. */
function resolveTenants(native: NativeConfig, options: NormalizeOptions) {
  return Object.entries(native.tenants ?? {}).map(([name, t]) => {
    // A tenant's confined servers keep their state apart too: `.tenants` is no upstream name.
    const root = stateRootOf(options)
    const own = buildConfig(
      {
        ...native,
        upstreams: t.upstreams,
        servers: t.servers,
        rateLimits: t.rateLimits,
        cedar: t.cedar,
        tenants: undefined,
      },
      { ...options, stateRoot: join(root, '.tenants', name) },
    )
    return {
      name,
      upstreams: own.upstreams,
      servers: own.servers,
      ...(t.permissions === undefined ? {} : { permissions: t.permissions }),
      ...(t.rateLimits === undefined ? {} : { rateLimits: own.rateLimits }),
      ...(t.guards === undefined ? {} : { guards: t.guards }),
      ...(t.confirm === undefined ? {} : { confirm: t.confirm }),
      ...(t.contexts === undefined ? {} : { contexts: t.contexts }),
      ...(t.cedar === undefined ? {} : { cedar: own.cedar }),
    }
  })
}

/**
 * The files `auth:` names (the API keys file, the linked-token database), resolved against the
 * config file's directory like every other path: `barbican keys` and `serve` started from
 * another directory then read and write the same file.
 */
function resolveAuthPaths(auth: AuthConfig, baseDir: string | undefined): AuthConfig {
  const at = (path: string) =>
    isAbsolute(path) || path === ':memory:' ? path : resolve(baseDir ?? process.cwd(), path)
  return {
    ...auth,
    ...(auth.apiKeys?.file === undefined
      ? {}
      : { apiKeys: { ...auth.apiKeys, file: at(auth.apiKeys.file) } }),
    ...(auth.tokens === undefined || !('sqlite' in auth.tokens)
      ? {}
      : { tokens: { sqlite: at(auth.tokens.sqlite) } }),
  }
}

type ServerInput = NonNullable<NativeConfig['servers']>[string]
type StdioInput = Extract<NativeConfig['upstreams'][string], { command: string }>

/** Barbican's own files beside the config, which no sandbox may see (docs/sandbox.md). */
export function protectedPaths(native: NativeConfig, options: NormalizeOptions): string[] {
  const base = options.baseDir ?? process.cwd()
  const at = (path: string) => (isAbsolute(path) ? path : resolve(base, path))
  const store = native.store === undefined ? undefined : resolveStore(native.store, base)
  const storePath =
    store?.kind === 'memory' || store?.kind === 'postgres'
      ? undefined
      : (store?.path ?? join(base, DEFAULT_STORE_PATH))
  const tokens = native.auth?.tokens
  return [
    ...(options.configPath === undefined ? [] : [resolve(options.configPath)]),
    join(base, 'barbican.lock'),
    ...(storePath === undefined
      ? []
      : [storePath, `${storePath}-wal`, `${storePath}-shm`, `${storePath}-journal`]),
    ...(native.auth?.apiKeys?.file === undefined ? [] : [at(native.auth.apiKeys.file)]),
    ...(tokens !== undefined && 'sqlite' in tokens && tokens.sqlite !== ':memory:'
      ? [at(tokens.sqlite)]
      : []),
  ]
}

/**
 * Where confined servers keep their state (and npx its packages, beside it). A config without a
 * folder of its own (built in code, or text without a file) has no place for it but the working
 * directory, which may be anyone's checkout: that state goes to the temp directory instead, as the
 * demo's does, so building a gateway in a test never writes `.barbican/` into the checkout.
 */
export function stateRootOf(options: NormalizeOptions): string {
  if (options.stateRoot !== undefined) return options.stateRoot
  if (options.baseDir !== undefined) return join(options.baseDir, DEFAULT_STATE_ROOT)
  return join(tmpdir(), `barbican-unfiled-${process.getuid?.() ?? 'user'}`, 'state')
}

/** Confined unless the entry says `sandbox: none`; every default resolved to a path or number. */
function resolveSandbox(
  name: string,
  entry: StdioInput,
  native: NativeConfig,
  options: NormalizeOptions,
): SandboxSpec | 'none' {
  const input = entry.sandbox
  if (input === 'none') return 'none'
  const base = options.baseDir ?? process.cwd()
  const absolute = (path: string) => (isAbsolute(path) ? path : resolve(base, path))
  const limits = input?.limits ?? DEFAULT_SANDBOX_LIMIT_SETTINGS
  const stateRoot = stateRootOf(options)
  const stateDir = input?.stateDir === undefined ? join(stateRoot, name) : absolute(input.stateDir)
  const read = (input?.fs.read ?? []).map(absolute)
  const write = (input?.fs.write ?? []).map(absolute)
  const protect = protectedPaths(native, options)
  // What the entry itself grants (ADR 094); `.barbican/` is never granted, though not masked
  // (the state directories inside it are bound).
  const grants = inferGrants(
    {
      command: entry.command,
      args: entry.args.map(String),
      env: Object.fromEntries(Object.entries(entry.env).map(([k, v]) => [k, String(v)])),
      cwd: entry.cwd === undefined ? undefined : absolute(entry.cwd),
    },
    {
      protect: [...protect, join(base, dirname(DEFAULT_STORE_PATH))],
      home: homedir(),
      stateDir,
      explicit: { read, write },
    },
  )
  return {
    stateDir,
    read,
    write,
    protect,
    grants,
    connect: grants.connect,
    packageCache: join(dirname(stateRoot), DEFAULT_PACKAGE_CACHE_NAME),
    // Said only when accepted, so a spec without it reads as the default: refuse.
    ...(native.sandbox?.fallback === 'unconfined' ? { fallback: 'unconfined' as const } : {}),
    ...(input !== undefined && input.network.allow.length > 0
      ? {
          network: {
            allow: input.network.allow,
            maxConnections: input.network.maxConnections,
          },
        }
      : {}),
    limits: sandboxLimitsOf(limits),
  }
}

function resolveAudit(value: NativeConfig['audit'], options: NormalizeOptions): AuditConfig {
  const at = (path: string) =>
    isAbsolute(path) ? path : resolve(options.baseDir ?? process.cwd(), path)
  const exported = value.export
  // The environment's wins: a manifest gives each replica its own directory (ADR 090).
  const journalDir = options.env?.[AUDIT_JOURNAL_DIR_ENV] || value.journalDir
  const publish = options.env?.[AUDIT_CHECKPOINTS_PUBLISH_ENV] || value.checkpoints?.publish
  return {
    enabled: value.enabled,
    rawArguments: value.rawArguments,
    retentionDays: value.retentionDays,
    checkpointIntervalMs: value.checkpointIntervalMs,
    durability: value.durability,
    batchWindowMs: value.batchWindowMs,
    ...(value.path === undefined ? {} : { path: at(value.path) }),
    ...(journalDir === undefined ? {} : { journalDir: at(journalDir) }),
    ...(publish === undefined ? {} : { publishCheckpoints: at(publish) }),
    ...(exported === undefined
      ? {}
      : {
          export: {
            stdout: exported.stdout,
            ...(exported.file === undefined ? {} : { file: at(exported.file) }),
          },
        }),
  }
}

/** `store` and `redis`, with the environment's URLs over the file's (config/backends.ts). */
function backendsOf(
  native: NativeConfig,
  options: NormalizeOptions,
): { store?: StoreConfig; redis?: RedisConfig } {
  const env = options.env ?? {}
  const postgresUrl = env[POSTGRES_URL_ENV] || undefined
  const redisUrl = env[REDIS_URL_ENV] || undefined
  const issues = [
    postgresUrl === undefined
      ? undefined
      : envUrlIssue(POSTGRES_URL_ENV, postgresUrl, POSTGRES_SCHEMES),
    redisUrl === undefined ? undefined : envUrlIssue(REDIS_URL_ENV, redisUrl, REDIS_SCHEMES),
  ].filter((issue) => issue !== undefined)
  if (issues.length > 0) throw new ConfigError(issues)
  const fileStore =
    native.store === undefined ? undefined : resolveStore(native.store, options.baseDir)
  const store: StoreConfig | undefined =
    postgresUrl === undefined
      ? fileStore
      : {
          kind: 'postgres',
          url: postgresUrl,
          migrate: fileStore?.kind === 'postgres' ? fileStore.migrate : true,
        }
  const redis: RedisConfig | undefined =
    redisUrl === undefined
      ? native.redis
      : {
          url: redisUrl,
          prefix: native.redis?.prefix ?? DEFAULT_REDIS_PREFIX,
          quotaLeaseMs: native.redis?.quotaLeaseMs ?? DEFAULT_QUOTA_LEASE_MS,
        }
  return {
    ...(store === undefined ? {} : { store }),
    ...(redis === undefined
      ? {}
      : { redis: { url: redis.url, prefix: redis.prefix, quotaLeaseMs: redis.quotaLeaseMs } }),
  }
}

/**
 * With a PostgreSQL store, linked tokens go there too unless `auth.tokens` says otherwise: in
 * memory, a user linked through one replica would be unlinked on the next.
 */
function tokensInStore(auth: AuthConfig, store: StoreConfig | undefined): AuthConfig {
  if (auth.tokens !== undefined || store?.kind !== 'postgres') return auth
  return { ...auth, tokens: { postgres: store.url, migrate: store.migrate } }
}

function resolveStore(
  value: NonNullable<NativeConfig['store']>,
  baseDir: string | undefined,
): StoreConfig {
  if ('memory' in value) return { kind: 'memory' }
  if ('postgres' in value) return { kind: 'postgres', ...value.postgres }
  const path = value.sqlite.path || DEFAULT_STORE_PATH
  return { kind: 'sqlite', path: isAbsolute(path) ? path : resolve(baseDir ?? process.cwd(), path) }
}

function resolveListen(value: NativeConfig['listen'], override: string | undefined): ListenAddress {
  if (override !== undefined) {
    const parsed = parseListen(override)
    if ('error' in parsed) throw new ConfigError([{ path: ['--listen'], message: parsed.error }])
    return parsed
  }
  if (value === undefined) return { ...DEFAULT_LISTEN }
  if (typeof value === 'string') {
    const parsed = parseListen(value)
    // The schema already rejected malformed strings; this keeps the types honest.
    if ('error' in parsed) throw new ConfigError([{ path: ['listen'], message: parsed.error }])
    return parsed
  }
  const host = value.host.replace(/^\[(.*)\]$/, '$1')
  return { host, port: value.port }
}

function resolveSecurity(value: NativeConfig['security'], listen: ListenAddress): SecurityConfig {
  let allowedHosts = value.allowedHosts?.map((host) => host.toLowerCase())
  if (allowedHosts === undefined) {
    allowedHosts = [...DEFAULT_ALLOWED_HOSTS]
    // A client reaching a specific bound address sends it as Host; an IP literal or the name the
    // operator chose to bind cannot be an attacker's rebinding domain.
    const own = hostForHeader(listen.host)
    if (!isWildcardHost(listen.host) && !allowedHosts.includes(own)) allowedHosts.push(own)
  }
  // Loopback origins are always allowed; configured ones add to them. Entries keep their port or
  // lack of one, which the HTTP guard reads as "this port" or "any port".
  const extra = value.allowedOrigins.map((origin) => origin.toLowerCase().replace(/\/$/, ''))
  return {
    allowedHosts,
    allowedOrigins: [...new Set([...LOOPBACK_ORIGINS, ...extra])],
    allowInsecureNonLoopback: value.allowInsecureNonLoopback,
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const child of Object.values(value)) deepFreeze(child)
  }
  return value
}
