/**
 * Names, patterns and default values shared by the schema, the validators and the docs, kept
 * apart from the zod schemas so every module can import them without import cycles.
 */
import { DEFAULT_JSON_LIMITS } from '../protocol/json-limits.ts'

/** Upstream and virtual server names: safe in URLs, tool-name prefixes, logs and metric labels. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

/** Separators may only use characters the MCP spec allows in tool names. */
export const SEPARATOR_PATTERN = /^[A-Za-z0-9_.-]{1,8}$/

/** Exposed tool and prompt names (MCP 2025-11-25 tool-name guidance). */
export const ITEM_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/

/**
 * Loopback names a local client may send as `Host`, each matching any port: the HTTP guard's
 * allowlist (src/transports/http-guard.ts) unless `security.allowedHosts` replaces it.
 */
export const DEFAULT_ALLOWED_HOSTS: readonly string[] = Object.freeze([
  'localhost',
  '127.0.0.1',
  '[::1]',
])

/**
 * Loopback web origins, any port, http or https: always allowed, so local browser clients (the
 * MCP Inspector) work out of the box. `security.allowedOrigins` adds to these.
 */
export const LOOPBACK_ORIGINS: readonly string[] = Object.freeze([
  'http://localhost',
  'http://127.0.0.1',
  'http://[::1]',
  'https://localhost',
  'https://127.0.0.1',
  'https://[::1]',
])

/** The values of `tools.mode` (the `ToolsMode` of src/config/config.ts); `all` is the default. */
export const TOOLS_MODES = ['all', 'search', 'code'] as const

/** Limits of one code-mode program (`servers.NAME.code`, docs/context-economy.md). */
export const CODE_DEFAULTS = Object.freeze({
  memoryMb: 64,
  timeoutMs: 30_000,
  maxCalls: 100,
  maxOutputKb: 64,
  maxConcurrent: 8,
})

/**
 * Tokens (o200k_base) search mode's names in view may take in search_tools' description
 * (`tools.search.namesBudget`, ADR 126): about 300 tools' names at the benchmark's density.
 */
export const DEFAULT_NAMES_BUDGET = 2000

/** Every numeric default in one place, so code and docs cannot drift apart. */
export const DEFAULT_LIMITS = Object.freeze({
  ...DEFAULT_JSON_LIMITS,
  maxBodyBytes: 4 * 1024 * 1024,
  requestTimeoutMs: 120_000,
  upstreamRequestTimeoutMs: 60_000,
  upstreamConnectTimeoutMs: 30_000,
  maxSessions: 1000,
  maxSessionsPerIdentity: 100,
  sessionIdleTimeoutMs: 30 * 60_000,
  listPageSize: 500,
  heldCallTimeoutMs: 120_000,
  // How lists and handshakes wait for slow upstreams (virtual-servers/catalog-recovery.ts).
  listDeadlineMs: 3_000,
  handshakeWaitMs: 500,
  listRetryMs: 1_000,
  listRetryMaxMs: 60_000,
  upstreamMaxQueuedBytes: 8 * 1024 * 1024,
  upstreamMaxCallOutputBytes: 16 * 1024 * 1024,
  // What one search_tools call may cost (docs/security.md, ADR 105).
  searchMaxTerms: 16,
  searchMaxExpansions: 48,
  searchMaxResults: 50,
  searchBudgetMs: 25,
  // search_tools and run_code calls per caller per minute (token bucket).
  metaToolCallsPerMinute: 120,
})

/** `metrics:` defaults (docs/observability.md). */
export const DEFAULT_METRICS = Object.freeze({ enabled: true, maxTools: 100 })

export const DEFAULT_SEPARATOR = '__'

/** The default store path, relative to the config file's directory. */
export const DEFAULT_STORE_PATH = '.barbican/barbican.db'

/** Where each confined upstream's state directory goes, beside the config (docs/sandbox.md). */
export const DEFAULT_STATE_ROOT = '.barbican/state'

/** Beside the state root: where confined npx packages are installed (docs/sandbox.md). */
export const DEFAULT_PACKAGE_CACHE_NAME = 'npm'

/**
 * How long a quota lease lives unless `redis.quotaLeaseMs` says otherwise (ADR 085). Here, not
 * beside the schema, so the gateway reads it without loading zod (test/bin/build.test.ts).
 */
export const DEFAULT_QUOTA_LEASE_MS = 200

/** File names tried, in order, when no path is given. */
export const DEFAULT_CONFIG_FILES: readonly string[] = Object.freeze([
  'barbican.yaml',
  'barbican.yml',
  'barbican.json',
])
