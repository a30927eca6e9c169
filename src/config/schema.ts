/**
 * The native configuration format as a zod schema: the single source of truth for validation,
 * for the published JSON Schema (`schema/config.json`, editor completion) and for the defaults
 * documented in docs/configuration.md. Every key carries a title and a description because
 * editors show them while the operator types.
 */
import { z } from 'zod'
import { AUDIT_DEFAULTS, auditSchema } from './audit-schema.ts'
import { authSchema, permission } from './auth-schema.ts'
import { redisSchema } from './backends.ts'
import { confirmSchema, contextsSchema } from './confirm-schema.ts'
import { DEFAULT_LIMITS, DEFAULT_METRICS, NAME_PATTERN } from './defaults.ts'
import { DEFAULT_LISTEN, parseListen } from './listen.ts'
import { guardsSchema, rateLimitsSchema } from './policy-schema.ts'
import { virtualServerSchema } from './server-schema.ts'
import { storeSchema } from './trust-schema.ts'
import { upstreamSchema } from './upstream-schema.ts'

const HOURS_24 = 24 * 60 * 60_000

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

const positiveMs = (max = HOURS_24) => z.int().min(1).max(max)
const byteCount = z
  .int()
  .min(1)
  .max(1024 * 1024 * 1024)

const listenObject = z.strictObject({
  host: doc(
    z.string().min(1).default(DEFAULT_LISTEN.host),
    'Host',
    `Address to bind: an IP address or host name. Default: ${DEFAULT_LISTEN.host}.`,
  ),
  port: doc(
    z.int().min(0).max(65535).default(DEFAULT_LISTEN.port),
    'Port',
    `TCP port; 0 picks a free port. Default: ${DEFAULT_LISTEN.port}.`,
  ),
})

const listenString = z
  .string()
  .superRefine((text, ctx) => {
    const parsed = parseListen(text)
    if ('error' in parsed) ctx.addIssue({ code: 'custom', message: parsed.error })
  })
  .meta({
    title: 'HOST:PORT',
    description: 'e.g. "127.0.0.1:7300", "0.0.0.0:8080" or "[::1]:7300".',
    pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^:\\[\\]]+):[0-9]{1,5}$',
  })

const listen = doc(
  z.union([listenString, listenObject]),
  'Listen address',
  'Where `barbican serve` accepts HTTP connections: "HOST:PORT" or { host, port }. ' +
    'Default: 127.0.0.1:7300 (loopback only).',
)

// The grammar the HTTP guard matches: a name (any port), name:port, *.domain, [IPv6], or *.
const HOST_ENTRY =
  /^(\*|(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?)$/

const hostEntry = z.string().superRefine((text, ctx) => {
  if (!HOST_ENTRY.test(text)) {
    ctx.addIssue({
      code: 'custom',
      message:
        'expected a host as sent in the Host header: "name" (any port), "name:port", ' +
        '"*.example.com", "[::1]", or "*"',
    })
  }
})

const originEntry = z.string().superRefine((text, ctx) => {
  if (text === '*' || text === 'null') return
  let url: URL | undefined
  try {
    url = new URL(text)
  } catch {}
  const bare = url && url.pathname === '/' && url.search === '' && url.hash === '' && !url.username
  if (
    !url ||
    !/^https?:$/.test(url.protocol) ||
    !bare ||
    /\/./.test(text.replace(/^https?:\/\//, ''))
  ) {
    ctx.addIssue({
      code: 'custom',
      message:
        'expected an origin: "https://app.example.com" (any port), "http://host:8080", "null" or "*"',
    })
  }
})

const security = z.strictObject({
  allowedHosts: doc(
    z.array(hostEntry).optional(),
    'Allowed Host headers',
    'Host header values accepted; requests with any other are refused, which defeats DNS ' +
      'rebinding. Entries: "name" (any port), "name:port", "*.example.com", "[::1]", or "*" ' +
      '(no check). Replaces the default: localhost, 127.0.0.1, [::1], plus the listen host ' +
      'when it is a specific address.',
  ),
  allowedOrigins: doc(
    z.array(originEntry).default([]),
    'Allowed Origins',
    'Browser origins allowed in addition to the loopback ones (http or https on localhost, ' +
      '127.0.0.1 or [::1], any port). Entries: "https://app.example.com" (any port), ' +
      '"http://host:8080", "null", or "*". Requests without an Origin header (non-browser ' +
      'clients) are not affected. Default: none.',
  ),
  allowInsecureNonLoopback: doc(
    z.boolean().default(false),
    'Allow insecure non-loopback bind',
    'Barbican refuses to listen on a non-loopback address without inbound authentication ' +
      'unless this is true. Default: false.',
  ),
})

const limitField = (
  key: keyof typeof DEFAULT_LIMITS,
  schema: z.ZodInt,
  title: string,
  text: string,
) => doc(schema.default(DEFAULT_LIMITS[key]), title, `${text} Default: ${DEFAULT_LIMITS[key]}.`)

const limits = z.strictObject({
  maxMessageBytes: limitField(
    'maxMessageBytes',
    byteCount,
    'Max message bytes',
    'Largest single JSON-RPC message, in bytes of UTF-8.',
  ),
  maxBodyBytes: limitField(
    'maxBodyBytes',
    byteCount,
    'Max body bytes',
    'Largest HTTP request body (a batch holds several messages).',
  ),
  maxDepth: limitField(
    'maxDepth',
    z.int().min(2).max(1000),
    'Max nesting depth',
    'Deepest nesting of objects and arrays in a message.',
  ),
  maxStringLength: limitField(
    'maxStringLength',
    byteCount,
    'Max string length',
    'Longest string in a message, in UTF-16 code units.',
  ),
  maxArrayLength: limitField(
    'maxArrayLength',
    z.int().min(1).max(10_000_000),
    'Max array length',
    'Most elements in one array (a batch counts too).',
  ),
  maxObjectKeys: limitField(
    'maxObjectKeys',
    z.int().min(1).max(10_000_000),
    'Max object keys',
    'Most keys in one object.',
  ),
  requestTimeoutMs: limitField(
    'requestTimeoutMs',
    positiveMs(),
    'Request timeout (ms)',
    'Longest the gateway works on one client request before answering with a timeout error.',
  ),
  upstreamRequestTimeoutMs: limitField(
    'upstreamRequestTimeoutMs',
    positiveMs(),
    'Upstream request timeout (ms)',
    "Default for each upstream's requestTimeoutMs.",
  ),
  upstreamConnectTimeoutMs: limitField(
    'upstreamConnectTimeoutMs',
    positiveMs(),
    'Upstream connect timeout (ms)',
    'Longest an upstream may take to start and finish its handshake.',
  ),
  maxSessions: limitField(
    'maxSessions',
    z.int().min(1).max(1_000_000),
    'Max sessions',
    'Most client sessions open at once per transport (Streamable HTTP, legacy SSE, WebSocket); beyond, the oldest idle session is evicted, and a new one is refused (503) only when none is idle.',
  ),
  maxSessionsPerIdentity: limitField(
    'maxSessionsPerIdentity',
    z.int().min(1).max(1_000_000),
    'Max sessions per identity',
    'Most sessions one identity (without inbound auth: one client address) holds open per transport; beyond, its own oldest idle session is evicted, and a new one is refused (429) only when none is idle.',
  ),
  sessionIdleTimeoutMs: limitField(
    'sessionIdleTimeoutMs',
    positiveMs(7 * HOURS_24),
    'Session idle timeout (ms)',
    'A client session without traffic for this long is closed.',
  ),
  heldCallTimeoutMs: limitField(
    'heldCallTimeoutMs',
    positiveMs(),
    'Held call timeout (ms)',
    'Longest a 2026-07-28 call waits for the client to come back with the input it was asked for (input_required); also how long every requestState stays valid.',
  ),
  listPageSize: limitField(
    'listPageSize',
    z.int().min(1).max(100_000),
    'List page size',
    'Most items in one page of a merged tools, prompts, resources or templates list; more are served with an opaque nextCursor.',
  ),
  listDeadlineMs: limitField(
    'listDeadlineMs',
    positiveMs(),
    'Listing deadline (ms)',
    'Longest a merged list waits for upstreams still connecting or listing. Those not listed by then are left out and named in the result _meta "dev.barbican/degraded"; clients get list_changed when they are ready.',
  ),
  handshakeWaitMs: limitField(
    'handshakeWaitMs',
    positiveMs(),
    'Handshake wait (ms)',
    "Longest a client's initialize (or server/discover) waits for upstreams still connecting, to include their capabilities; a slow upstream never holds it longer.",
  ),
  listRetryMs: limitField(
    'listRetryMs',
    positiveMs(),
    'List retry delay (ms)',
    'Delay before an upstream whose lists failed is listed again, in the background; it doubles after every failure, up to listRetryMaxMs.',
  ),
  listRetryMaxMs: limitField(
    'listRetryMaxMs',
    positiveMs(),
    'List retry cap (ms)',
    'Longest delay between two background retries of an upstream whose lists failed.',
  ),
  upstreamMaxQueuedBytes: limitField(
    'upstreamMaxQueuedBytes',
    z
      .int()
      .min(1024)
      .max(1024 ** 3),
    'Upstream input queue (bytes)',
    'Most bytes that may wait for a stdio upstream to read them; beyond it, calls to that upstream fail at once naming this limit, so a server that stops reading cannot grow the gateway.',
  ),
  upstreamMaxCallOutputBytes: limitField(
    'upstreamMaxCallOutputBytes',
    z
      .int()
      .min(1024)
      .max(1024 ** 3),
    'Upstream output per call (bytes)',
    'Most bytes a stdio upstream may send for one request: its reply and the progress notifications that name the request. Beyond it, the request fails naming this limit and the upstream is told to cancel it.',
  ),
  searchMaxTerms: limitField(
    'searchMaxTerms',
    z.int().min(1).max(1000),
    'Search: words searched',
    'Most distinct words (stop words aside) of one search_tools call that are searched; later words are left out and the result says so.',
  ),
  searchMaxExpansions: limitField(
    'searchMaxExpansions',
    z.int().min(0).max(10_000),
    'Search: synonyms added',
    'Most synonyms one search_tools call adds to its words, in the order of the words.',
  ),
  searchMaxResults: limitField(
    'searchMaxResults',
    z.int().min(1).max(1000),
    'Search: most results',
    'Largest `limit` a search_tools call may ask for; more is refused.',
  ),
  searchBudgetMs: limitField(
    'searchBudgetMs',
    z.int().min(1).max(60_000),
    'Search: time budget (ms)',
    'Main-thread time one search_tools call may spend ranking, in slices that let other requests run between them; beyond it, the call answers with the best tools found so far and says the search was cut short.',
  ),
  metaToolCallsPerMinute: limitField(
    'metaToolCallsPerMinute',
    z.int().min(1).max(1_000_000),
    'Meta-tool calls per caller per minute',
    'search_tools and run_code calls one caller (subject, tenant and client) may make per minute on one virtual server, as a token bucket; beyond, they are refused with -32029 and a retry-after.',
  ),
})

const logLevel = z.enum(['debug', 'info', 'warn', 'error'])

/** The components a level can be set for: the `part` field of their log lines. */
export const LOG_COMPONENTS = [
  'gateway',
  'upstream',
  'session',
  'call',
  'http',
  'auth',
  'trust',
] as const

const log = z.strictObject({
  level: doc(
    logLevel.default('info'),
    'Log level',
    'Least severe level written to stderr, for components without their own. Default: info.',
  ),
  levels: doc(
    z.partialRecord(z.enum(LOG_COMPONENTS), logLevel).default({}),
    'Levels by component',
    'Least severe level per component (the `part` field of a line): gateway, upstream, session, call, http, auth, trust.',
  ),
  format: doc(
    z.enum(['auto', 'json', 'pretty']).default('auto'),
    'Log format',
    'auto: readable lines on a terminal, JSON lines otherwise. json: always one JSON object per line. pretty: always readable lines.',
  ),
  redact: doc(
    z.array(z.string().regex(/^[^.\s]+(\.[^.\s]+)*$/, 'a dot-separated path')).default([]),
    'Redacted paths',
    'Field paths whose values are replaced by [redacted] in every line (`*` is any one key), on top of credential-like keys (authorization, cookie, password, secret, token, apiKey…), always replaced.',
  ),
})

const metrics = z.strictObject({
  enabled: doc(
    z.boolean().default(true),
    'Enabled',
    'Serve Prometheus metrics at /metrics (docs/observability.md). false: /metrics answers 404 ' +
      'and nothing is counted. Default: true.',
  ),
  maxTools: doc(
    z.int().min(1).max(100_000).default(DEFAULT_METRICS.maxTools),
    'Max tool labels',
    'Most distinct tool names that get their own `tool` label; calls to further tools are ' +
      `counted under tool="other", which bounds the number of series. Default: ${DEFAULT_METRICS.maxTools}.`,
  ),
  token: doc(
    z.string().min(16).optional(),
    'Scrape token',
    `A bearer token that may read /metrics (write "\${BARBICAN_METRICS_TOKEN}" to read it from ` +
      'the environment; at least 16 characters). When set it is required, except from a ' +
      'credential with the barbican:admin scope. Default: none (see docs/observability.md for ' +
      'who may read /metrics then).',
  ),
})

const upstreamsRecord = z.record(z.string().regex(NAME_PATTERN), upstreamSchema)
const serversRecord = z.record(z.string().regex(NAME_PATTERN), virtualServerSchema)

/** `cedar:`: policy files and whether they enforce. */
const cedarSchema = z.strictObject({
  policies: doc(
    z.array(z.string().min(1)).min(1),
    'Policy files',
    'Files of Cedar policies (relative to the config file), judged against the schema ' +
      'Barbican ships; `barbican check` validates them. See docs/policy.md.',
  ),
  mode: doc(
    z.enum(['enforce', 'shadow']).default('enforce'),
    'Mode',
    '`enforce` refuses what the policies deny; `shadow` only logs and audits would-be ' +
      'denials. Default: enforce.',
  ),
})

/** One tenant (docs/tenants.md): its own upstreams, virtual servers, permissions and policies. */
const tenant = z.strictObject({
  upstreams: doc(
    upstreamsRecord,
    'Upstreams',
    'The tenant’s own MCP servers, by name; names may repeat those of other tenants.',
  ),
  servers: doc(
    serversRecord.optional(),
    'Virtual servers',
    'The tenant’s virtual servers, at the same paths as the gateway’s (/mcp, /mcp/NAME), seen ' +
      'only by its callers. Default: one server "default" over all its upstreams.',
  ),
  permissions: doc(
    z.array(permission).optional(),
    'Permissions',
    'Rules for the tenant’s callers, in place of `auth.permissions`. Default: `auth.permissions`.',
  ),
  rateLimits: doc(
    rateLimitsSchema.optional(),
    'Quotas',
    'The tenant’s quotas, in place of the top-level `rateLimits`. Default: the top-level ones, ' +
      'counted apart for each tenant.',
  ),
  guards: doc(
    guardsSchema.optional(),
    'Guards',
    'The tenant’s argument and result checks, in place of the top-level `guards`. Default: those.',
  ),
  confirm: doc(
    confirmSchema.optional(),
    'Confirmation',
    'The tenant’s calls a human must confirm, in place of the top-level `confirm`. Default: that.',
  ),
  contexts: doc(
    contextsSchema.optional(),
    'Contexts',
    'The tenant’s labels and secure contexts, in place of the top-level `contexts`. Default: those.',
  ),
  cedar: doc(
    cedarSchema.optional(),
    'Cedar policies',
    'The tenant’s Cedar policies (files relative to the config file), in place of the top-level ' +
      '`cedar`. Default: that.',
  ),
})

/** The whole native file. Unknown keys are errors: a typo must never be silently ignored. */
export const nativeConfigSchema = z.strictObject({
  $schema: doc(z.string().optional(), 'JSON Schema', 'Editor hint; ignored by Barbican.'),
  listen: listen.optional(),
  security: doc(
    security.default({ allowedOrigins: [], allowInsecureNonLoopback: false }),
    'Security',
    'Checks applied to every HTTP request, and the non-loopback bind guard.',
  ),
  limits: doc(
    limits.default({ ...DEFAULT_LIMITS }),
    'Limits',
    'Bounds on message size and shape, timeouts and sessions.',
  ),
  log: doc(
    log.default({ level: 'info', levels: {}, format: 'auto', redact: [] }),
    'Logging',
    'Logs on stderr: readable on a terminal, JSON lines otherwise.',
  ),
  metrics: doc(
    metrics.default({ ...DEFAULT_METRICS }),
    'Metrics',
    'Prometheus metrics at /metrics: who may read them and how many tool labels they keep.',
  ),
  auth: doc(
    authSchema.optional(),
    'Authentication',
    'Inbound authentication (OAuth resource server, API keys), the identity of `barbican ' +
      'stdio`, the on-behalf-of assertion sent upstream, and the outbound network allowlist. ' +
      'See docs/security.md. Default: none (loopback binds only).',
  ),
  sandbox: doc(
    z
      .strictObject({
        fallback: doc(
          z.enum(['refuse', 'unconfined']).default('refuse'),
          'Fallback',
          'What happens to a confined stdio upstream that no mechanism on this host can ' +
            'confine (no bubblewrap, and not a Node program for the Node.js permission model): ' +
            '"refuse" (it does not start; the error names the fix) or "unconfined" (it runs ' +
            "with Barbican's own rights, marked unconfined in the log, barbican check, /readyz " +
            'and the console). Node servers keep the permission model either way. ' +
            'Default: refuse.',
        ),
      })
      .optional(),
    'Sandbox',
    'Gateway-wide sandbox settings (docs/sandbox.md); each upstream has its own `sandbox` too.',
  ),
  upstreams: doc(
    upstreamsRecord,
    'Upstreams',
    'The MCP servers behind the gateway, by name. A name is 1-64 letters, digits, "_" or "-", ' +
      'starting with a letter or digit, and must not contain the namespacing separator.',
  ),
  servers: doc(
    serversRecord.optional(),
    'Virtual servers',
    'Groups of upstreams served at their own path: "default" at /mcp, NAME at /mcp/NAME. ' +
      'Default: one server "default" over all upstreams.',
  ),
  tenants: doc(
    z.record(z.string().regex(NAME_PATTERN), tenant).optional(),
    'Tenants',
    'Isolated tenants on one gateway, by name (docs/tenants.md). A caller’s tenant comes from ' +
      'the token claim `auth.jwt.tenantClaim` (or introspection’s) or from its API key; a caller ' +
      'without one uses the top-level upstreams and servers (the default tenant), and a caller ' +
      'naming a tenant not listed here is refused (403). "default" is reserved. Default: none.',
  ),
  store: storeSchema.optional(),
  redis: redisSchema.optional(),
  audit: auditSchema.default({ ...AUDIT_DEFAULTS }),
  rateLimits: rateLimitsSchema.optional(),
  guards: guardsSchema.optional(),
  confirm: confirmSchema.optional(),
  contexts: contextsSchema.optional(),
  cedar: doc(
    cedarSchema.optional(),
    'Cedar policies',
    'A Cedar policy engine judging every request after `auth.permissions`. Default: none.',
  ),
})

/** The native file as written (before defaults). */
export type NativeConfigInput = z.input<typeof nativeConfigSchema>

/** The native file after zod applied its defaults, before cross-checks and normalization. */
export type NativeConfig = z.output<typeof nativeConfigSchema>
