/**
 * The normalized configuration the gateway consumes. Every default is applied, every reference
 * is checked and every `auto` is resolved, so no consumer needs to know the file formats or
 * repeat a default. Everything here is plain data (JSON-serializable) so the admin API can show
 * it as it is.
 */

import type { JsonLimits } from '../protocol/json-limits.ts'
import type { LogLevel } from '../telemetry/log.ts'
import type { AuthConfig, CredentialsConfig } from './auth-schema.ts'
import type { RedisConfig } from './backends.ts'
import type { ConfirmConfig, ContextsConfig } from './confirm-schema.ts'
import { CODE_DEFAULTS, type TOOLS_MODES } from './defaults.ts'
import type { SandboxSpec } from './sandbox-spec.ts'

/** Where the HTTP listener binds. `host` is bare (`::1`, never `[::1]`). */
export interface ListenAddress {
  readonly host: string
  readonly port: number
}

/** Browser-facing checks applied to every HTTP request (DNS rebinding, cross-origin calls). */
export interface SecurityConfig {
  /**
   * Accepted `Host` header values, lower-cased: `name` (any port), `name:port`, `*.domain`,
   * `[v6]`, or `*`. The complete list (defaults already applied).
   */
  readonly allowedHosts: readonly string[]
  /**
   * Accepted `Origin` values, lower-cased: `scheme://host` (any port), `scheme://host:port`,
   * `null` or `*`. The complete list: the loopback origins, then the configured ones.
   */
  readonly allowedOrigins: readonly string[]
  /** The operator's explicit consent to bind a non-loopback address without inbound auth. */
  readonly allowInsecureNonLoopback: boolean
}

/** Resource bounds; the JSON fields can be passed as they are wherever `JsonLimits` is expected. */
export interface LimitsConfig extends JsonLimits {
  /** Largest HTTP request body, which may hold a batch of several messages. */
  readonly maxBodyBytes: number
  /** Longest the gateway works on one client request before answering with a timeout error. */
  readonly requestTimeoutMs: number
  /** Default for each upstream's `requestTimeoutMs`. */
  readonly upstreamRequestTimeoutMs: number
  /** Longest an upstream may take to start and complete its handshake. */
  readonly upstreamConnectTimeoutMs: number
  /** Most client sessions open at once per transport; beyond, the oldest idle one is evicted. */
  readonly maxSessions: number
  /** Most sessions per transport of one identity (one address without auth); same eviction. */
  readonly maxSessionsPerIdentity: number
  /** A client session with no traffic for this long is closed. */
  readonly sessionIdleTimeoutMs: number
  /** Most items in one page of a merged list; the rest follow with `nextCursor`. */
  readonly listPageSize: number
  /** How long a held 2026-07-28 call, and any `requestState`, waits for the client's retry. */
  readonly heldCallTimeoutMs: number
  /** Longest a merged list waits for upstreams; later ones are left out and marked degraded. */
  readonly listDeadlineMs: number
  /** Longest a client's initialize waits for upstreams still connecting. */
  readonly handshakeWaitMs: number
  /** First delay before an upstream whose lists failed is listed again in the background. */
  readonly listRetryMs: number
  /** Longest delay between two such retries (the delay doubles up to it). */
  readonly listRetryMaxMs: number
  /** Most bytes waiting for one stdio upstream to read them (memory bound per upstream). */
  readonly upstreamMaxQueuedBytes: number
  /** Most bytes a stdio upstream may send for one request (its reply and its progress). */
  readonly upstreamMaxCallOutputBytes: number
  /** Most distinct words of one search_tools call searched; the rest are left out. */
  readonly searchMaxTerms: number
  /** Most synonyms one search_tools call adds to its words. */
  readonly searchMaxExpansions: number
  /** Most tools one search_tools call may ask for (`limit`). */
  readonly searchMaxResults: number
  /** Main-thread time one search_tools call may take; beyond, it answers with what it found. */
  readonly searchBudgetMs: number
  /** search_tools and run_code calls each caller may make per minute. */
  readonly metaToolCallsPerMinute: number
}

/** Prometheus metrics at `/metrics` (docs/observability.md). */
export interface MetricsConfig {
  readonly enabled: boolean
  /** Most distinct tool names with a `tool` label of their own; the rest are `other`. */
  readonly maxTools: number
  /** A bearer token that may read `/metrics`; when set, it is required (or an admin credential). */
  readonly token?: string | undefined
}

/** What an operator decides per upstream about trust (docs/trust.md). */
export interface TrustConfig {
  readonly firstSight: 'trust' | 'approve'
  readonly onChange: 'quarantine' | 'warn'
  readonly scan: 'warn' | 'quarantine'
  readonly allowFloating: boolean
  readonly allowInlineCode: boolean
  /** npm packages whose install scripts may run (ADR 107); absent: none. */
  readonly allowScripts?: readonly string[] | undefined
}

/** Where pins and baselines live; a relative SQLite path is already resolved. */
/** `audit:`, with paths resolved against the config file's directory. */
export interface AuditConfig {
  readonly enabled: boolean
  /** Absolute; absent: beside the store file (or in memory with a memory store). */
  readonly path?: string | undefined
  readonly rawArguments: boolean
  readonly retentionDays: number
  readonly checkpointIntervalMs: number
  /** `batched`: replies wait for a journal write, not an fsync (docs/audit.md "Durability"). */
  readonly durability: 'fsync' | 'batched'
  readonly batchWindowMs: number
  /**
   * Absolute; `BARBICAN_AUDIT_JOURNAL_DIR` over the file's. Absent: beside audit.db for SQLite,
   * none for PostgreSQL (every reply waits for its commit there; ADR 090).
   */
  readonly journalDir?: string | undefined
  readonly export?: { readonly file?: string | undefined; readonly stdout: boolean } | undefined
  /**
   * Absolute; `BARBICAN_AUDIT_CHECKPOINTS_PUBLISH` over `audit.checkpoints.publish`: where each
   * signed checkpoint is copied outside the store (ADR 102).
   */
  readonly publishCheckpoints?: string | undefined
}

export type StoreConfig =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'memory' }
  /** `migrate`: bring the schema up to date at start (ADR 055). */
  | { readonly kind: 'postgres'; readonly url: string; readonly migrate: boolean }

/** An upstream MCP server run as a child process speaking stdio. */
export interface StdioUpstreamConfig {
  readonly name: string
  readonly transport: 'stdio'
  readonly command: string
  readonly args: readonly string[]
  /** The process environment besides the pass-through variables the stdio transport adds. */
  readonly env: Readonly<Record<string, string>>
  /** Absolute working directory; absent means the gateway's own. */
  readonly cwd?: string
  /** Start the process at the first call that needs it instead of at gateway start. */
  readonly lazy: boolean
  /** Stop the process after this long without calls; 0 keeps it running. */
  readonly idleTimeoutMs: number
  readonly requestTimeoutMs: number
  /** Legacy sessions shared by all callers or one per identity (docs/bridging.md); absent: shared. */
  readonly sessions?: 'shared' | 'per-identity' | undefined
  /** Pinning, scan and launch policy; absent: the defaults (docs/trust.md). */
  readonly trust?: TrustConfig | undefined
  /** Barbican's own credentials for this upstream (docs/security.md); absent: none. */
  readonly credentials?: CredentialsConfig | undefined
  /** Its confinement (docs/sandbox.md), or 'none' when the entry opts out. */
  readonly sandbox: SandboxSpec | 'none'
}

/** How a remote upstream is reached; `auto` tries Streamable HTTP, then falls back to SSE. */
export type RemoteTransport = 'streamable-http' | 'sse' | 'websocket' | 'auto'

/** An upstream MCP server reached over the network. */
export interface RemoteUpstreamConfig {
  readonly name: string
  readonly transport: RemoteTransport
  readonly url: string
  /** Sent with every request to this upstream (the gateway's own credentials, never a client's). */
  readonly headers: Readonly<Record<string, string>>
  readonly requestTimeoutMs: number
  /** Legacy sessions shared by all callers or one per identity (docs/bridging.md); absent: shared. */
  readonly sessions?: 'shared' | 'per-identity' | undefined
  /** Pinning and scan policy; absent: the defaults (docs/trust.md). */
  readonly trust?: TrustConfig | undefined
  /** Barbican's own credentials for this upstream (docs/security.md); absent: none. */
  readonly credentials?: CredentialsConfig | undefined
}

/** An MCP servlet compiled to Wasm, run in-process with Extism (ADR 036). */
export interface WasmUpstreamConfig {
  readonly name: string
  readonly transport: 'wasm'
  /** Absolute path or https:// URL of the module. */
  readonly source: string
  readonly allowedHosts: readonly string[]
  /** Absolute host directory → path the module sees. */
  readonly allowedPaths: Readonly<Record<string, string>>
  readonly config: Readonly<Record<string, string>>
  readonly maxMemoryMb: number
  readonly maxModuleBytes: number
  /** Also the deadline of one call into the module. */
  readonly requestTimeoutMs: number
  readonly sessions?: undefined
  readonly trust?: TrustConfig | undefined
  /** A module holds no credentials of Barbican's. */
  readonly credentials?: undefined
}

/** One upstream server, discriminated by `transport`. */
export type UpstreamConfig = StdioUpstreamConfig | RemoteUpstreamConfig | WasmUpstreamConfig

/** How names from several upstreams are kept apart; `auto` is already resolved here. */
export interface NamespacingConfig {
  readonly mode: 'always' | 'on-conflict' | 'never'
  readonly separator: string
}

/**
 * Which items a virtual server exposes. Globs match the name a client would see without the
 * filter (namespaced where the mode prefixes); `include` absent admits everything, and
 * `exclude` wins over `include`.
 */
export interface ItemFilterConfig {
  readonly include: readonly string[] | undefined
  readonly exclude: readonly string[]
}

/** A filter that can also rename items: keys are names as filtered, values the names exposed. */
export interface RenamingFilterConfig extends ItemFilterConfig {
  readonly rename: Readonly<Record<string, string>>
}

/** Tools can additionally get their description replaced, keyed by the exposed (renamed) name. */
export interface ToolFilterConfig extends RenamingFilterConfig {
  readonly descriptions: Readonly<Record<string, string>>
}

/** A set of upstreams served as one MCP server at its own path. */
export interface VirtualServerConfig {
  readonly name: string
  /** `/mcp` for the server named `default`, `/mcp/NAME` otherwise (also `/sse/NAME`, `/ws/NAME`). */
  readonly path: string
  /** Names of the upstreams, in the order they were listed. */
  readonly upstreams: readonly string[]
  readonly namespacing: NamespacingConfig
  readonly tools: ToolFilterConfig
  readonly prompts: RenamingFilterConfig
  /** Globs over resource URIs (and resource template URI templates). */
  readonly resources: ItemFilterConfig
  /** How the catalogue is offered to clients (`tools.mode`, tools-only hosts). */
  readonly exposure: ToolExposure
  /** Most tokens its tool list may cost (src/exposure/tool-tokens.ts); absent: no budget. */
  readonly tokenBudget?: number | undefined
}

/**
 * `tools.mode` of a virtual server, one value from the file to the session
 * (docs/context-economy.md): `all`, the catalogue as is; `search`, tools/list shows
 * `search_tools` and `call_tool` plus the pinned tools (ADR 070); `code`, one `run_code` tool
 * over the catalogue (ADR 075).
 */
export type ToolsMode = (typeof TOOLS_MODES)[number]

/** How a virtual server offers its catalogue (docs/context-economy.md). */
export interface ToolExposure {
  readonly mode: ToolsMode
  /** `tools.pinned`: exposed tool names listed beside the meta-tools in search mode. */
  readonly pinned: readonly string[]
  /**
   * `tools.search.namesBudget`: tokens (o200k_base) search mode's names in view may take in
   * search_tools' description (ADR 126); past it, servers and counts only. Absent: the default.
   */
  readonly namesBudget?: number | undefined
  /** `tools-only`: resources and prompts also as tools (ADR 076). */
  readonly adapt?: 'tools-only' | undefined
  readonly code: CodeLimits
}

/** What one code-mode program may use. */
export interface CodeLimits {
  readonly memoryMb: number
  readonly timeoutMs: number
  readonly maxCalls: number
  readonly maxOutputKb: number
  /** Programs of one virtual server running at once; more are refused at once. */
  readonly maxConcurrent: number
}

/** A virtual server that offers its catalogue unchanged. */
export const PLAIN_EXPOSURE: ToolExposure = Object.freeze({
  mode: 'all',
  pinned: [],
  code: CODE_DEFAULTS,
})

/** One quota (docs/policy.md): which calls it counts, keyed by what, and how many per window. */
export interface RateLimitConfig {
  /** Names the limit in errors and logs. */
  readonly name: string
  /** What each counter is keyed by besides the virtual server; none: one counter per server. */
  readonly per: readonly ('subject' | 'tenant' | 'upstream' | 'tool')[]
  readonly limit: number
  readonly windowMs: number
  readonly algorithm: 'token-bucket' | 'fixed-window'
  /** Methods counted (exact names). */
  readonly methods: readonly string[]
  /** Virtual servers, upstreams and tools (exposed names) counted, by glob; absent: all. */
  readonly servers?: readonly string[] | undefined
  readonly upstreams?: readonly string[] | undefined
  readonly tools?: readonly string[] | undefined
}

export type GuardMode = 'off' | 'warn' | 'enforce'

/** Checks on tools/call arguments and results (docs/policy.md). */
export interface GuardsConfig {
  readonly arguments: GuardMode
  readonly output: GuardMode
  /** Largest result, in bytes of its JSON; absent: no limit. */
  readonly maxResultBytes?: number | undefined
  /** Largest result in estimated tokens (JSON characters / 4); absent: no limit. */
  readonly maxResultTokens?: number | undefined
  /** Over a size limit: cut the text content and add a note, or refuse the result. */
  readonly oversize: 'truncate' | 'error'
  /** Redact the built-in secret kinds and `redactPatterns`. */
  readonly redact: boolean
  /** Extra regular expressions (JavaScript syntax) whose matches are redacted. */
  readonly redactPatterns: readonly string[]
}

/** `cedar:`, with the policy files resolved against the config file's directory. */
export interface CedarConfig {
  readonly policies: readonly string[]
  /** `shadow` logs and records would-be denials without enforcing them. */
  readonly mode: 'enforce' | 'shadow'
}

/**
 * One tenant (docs/tenants.md): upstreams and virtual servers of its own, named as freely as the
 * top-level ones, which belong to the default tenant.
 */
export interface TenantConfig {
  readonly name: string
  readonly upstreams: readonly UpstreamConfig[]
  readonly servers: readonly VirtualServerConfig[]
  /** In place of `auth.permissions` for this tenant's callers; absent: those. */
  readonly permissions?: AuthConfig['permissions'] | undefined
  /** In place of the top-level `rateLimits`; absent: those (counted apart per tenant). */
  readonly rateLimits?: readonly RateLimitConfig[] | undefined
  /** Each in place of the top-level section of the same name; absent: that one (ADR 060). */
  readonly guards?: GuardsConfig | undefined
  readonly confirm?: ConfirmConfig | undefined
  readonly contexts?: ContextsConfig | undefined
  readonly cedar?: CedarConfig | undefined
}

/** The whole validated configuration. */
export interface Config {
  readonly listen: ListenAddress
  readonly security: SecurityConfig
  readonly limits: LimitsConfig
  readonly log: {
    readonly level: LogLevel
    /** Levels by component (the `part` field of a log line). */
    readonly levels: Readonly<Partial<Record<string, LogLevel>>>
    readonly format: 'auto' | 'json' | 'pretty'
    readonly redact: readonly string[]
  }
  readonly metrics: MetricsConfig
  /** In the order they were declared. */
  readonly upstreams: readonly UpstreamConfig[]
  /** In the order they were declared; at least one. */
  readonly servers: readonly VirtualServerConfig[]
  /** Isolated tenants besides the default one (docs/tenants.md); absent: none. */
  readonly tenants?: readonly TenantConfig[] | undefined
  /** Where pins live; absent: the SQLite file beside the config (docs/trust.md). */
  readonly store?: StoreConfig | undefined
  /** Shared ephemeral state between replicas; absent: process memory (ADR 055). */
  readonly redis?: RedisConfig | undefined
  /** The audit log (docs/audit.md); on by default. */
  readonly audit: AuditConfig
  /** Cedar policies (docs/policy.md); absent: none, and Cedar is never loaded. */
  readonly cedar?: CedarConfig | undefined
  /** Inbound authentication and identity settings; absent: anonymous callers (loopback only). */
  readonly auth?: AuthConfig | undefined
  /** Quotas, in the order they were declared (docs/policy.md); absent: none. */
  readonly rateLimits?: readonly RateLimitConfig[] | undefined
  /** Checks on tool arguments and results (docs/policy.md); absent: none. */
  readonly guards?: GuardsConfig | undefined
  /** Tool calls a human must confirm (docs/policy.md); absent: none. */
  readonly confirm?: ConfirmConfig | undefined
  /** Operator labels and secure contexts (docs/policy.md); absent: none. */
  readonly contexts?: ContextsConfig | undefined
  /**
   * Upstream entries held back because a `${VAR}` they use is not set: not started, in no
   * server (ADR 121). Absent: none. `--strict` makes such a variable an error instead.
   */
  readonly held?: readonly HeldUpstream[] | undefined
}

/** An upstream entry left out of the running configuration, and why. */
export interface HeldUpstream {
  readonly name: string
  /** The key and what it needs: `upstreams.web.headers.Authorization needs environment variable …`. */
  readonly reason: string
}

/** The file formats Barbican reads; `demo` is the embedded configuration. */
export type ConfigFormat = 'native' | 'claude' | 'vscode' | 'demo'

/** Where a configuration came from; `path` is absent for the demo. */
export interface ConfigSource {
  readonly path: string | undefined
  readonly format: ConfigFormat
}

/** The result of loading: the configuration, its origin, and what was ignored or adjusted. */
export interface LoadedConfig {
  readonly config: Config
  readonly source: ConfigSource
  /** Human-readable notes (ignored keys, renamed servers); the CLI logs them as warnings. */
  readonly warnings: readonly string[]
}
