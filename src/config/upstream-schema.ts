/**
 * The two kinds of upstream in the native format: a local process (`command`) or a remote
 * server (`url`). The key that is present tells them apart, in the file and in the schema.
 */
import { z } from 'zod'
import { credentialsSchema } from './auth-schema.ts'
import { DEFAULT_EGRESS_MAX_CONNECTIONS, egressEntryProblem } from './egress-allow.ts'
import { DEFAULT_SANDBOX_LIMIT_SETTINGS } from './sandbox-spec.ts'
import { trustSchema } from './trust-schema.ts'

const HEADER_NAME_PATTERN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const HOURS_24 = 24 * 60 * 60_000

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

// Args, env values and header values are strings on the wire, but YAML turns `3000` or `true`
// into numbers and booleans; accepting those spares the operator a round of quoting.
const scalar = z.union([z.string(), z.number(), z.boolean()]).transform(String)

const positiveMs = z.int().min(1).max(HOURS_24)

const requestTimeout = doc(
  positiveMs.optional(),
  'Request timeout (ms)',
  'Longest a request to this upstream may take. Default: limits.upstreamRequestTimeoutMs (60000).',
)

const sessions = doc(
  z.enum(['shared', 'per-identity']).optional(),
  'Legacy sessions',
  'For upstreams speaking a revision before 2026-07-28: one session shared by every caller ' +
    '(shared), or one per caller identity, each with its own initialize (per-identity; for a ' +
    'stdio upstream that is one process per identity). Anonymous callers always share. ' +
    'Default: shared.',
)

const credentials = doc(
  credentialsSchema.optional(),
  'Credentials',
  "What Barbican presents to this upstream on its own or on a user's behalf: none, static " +
    'secrets (headers or environment), oauth (per-user account linking), client-credentials ' +
    'or token-exchange. See docs/security.md. Default: none.',
)

const paths = (title: string, description: string) =>
  doc(z.array(z.string().min(1)).default([]), title, description)

const limit = (title: string, description: string, max: number, fallback: number) =>
  doc(z.int().min(1).max(max).default(fallback), title, `${description} Default: ${fallback}.`)

const limits = z
  .strictObject({
    memoryMb: limit(
      'Memory (MB)',
      'Heap and other private memory per process (RLIMIT_DATA).',
      1024 * 1024,
      DEFAULT_SANDBOX_LIMIT_SETTINGS.memoryMb,
    ),
    processes: limit(
      'Processes',
      'Processes and threads of the sandbox (RLIMIT_NPROC).',
      65_536,
      DEFAULT_SANDBOX_LIMIT_SETTINGS.processes,
    ),
    cpuSeconds: limit(
      'CPU seconds',
      'CPU time per process over its life (RLIMIT_CPU).',
      365 * 24 * 3600,
      DEFAULT_SANDBOX_LIMIT_SETTINGS.cpuSeconds,
    ),
    fileSizeMb: limit(
      'File size (MB)',
      'Largest file a process may write (RLIMIT_FSIZE).',
      1024 * 1024,
      DEFAULT_SANDBOX_LIMIT_SETTINGS.fileSizeMb,
    ),
  })
  .default({ ...DEFAULT_SANDBOX_LIMIT_SETTINGS })

const allow = doc(
  z
    .array(
      z
        .string()
        .min(1)
        .superRefine((entry, ctx) => {
          const problem = egressEntryProblem(entry)
          if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem })
        }),
    )
    .default([]),
  'Allowed hosts',
  'Hosts reachable through the egress proxy: host names, *.domain patterns, IP addresses or ' +
    'CIDR ranges, each with an optional :port (:* for any; without one, 80 and 443). ' +
    'Loopback, private, link-local and metadata addresses only when the address or its range ' +
    'is listed. Default: [] (no network).',
)

const sandbox = doc(
  z
    .union([
      z.literal('none'),
      z.strictObject({
        fs: doc(
          z
            .strictObject({
              read: paths('Read', 'Paths the server may read. Default: [].'),
              write: paths('Write', 'Paths the server may read and write. Default: [].'),
            })
            .default({ read: [], write: [] }),
          'Files',
          'Paths granted besides the defaults (docs/sandbox.md); relative paths resolve ' +
            'against the config file. Default: none.',
        ),
        network: doc(
          z
            .strictObject({
              allow,
              maxConnections: limit(
                'Connections',
                'Connections through the egress proxy at once; more are dropped.',
                4096,
                DEFAULT_EGRESS_MAX_CONNECTIONS,
              ),
            })
            .default({ allow: [], maxConnections: DEFAULT_EGRESS_MAX_CONNECTIONS }),
          'Network',
          'What the server may reach. Default: nothing (no network).',
        ),
        stateDir: doc(
          z.string().min(1).optional(),
          'State directory',
          "The server's persistent writable directory and HOME. Default: " +
            '.barbican/state/NAME beside the config file.',
        ),
        limits: doc(
          limits,
          'Limits',
          'Kernel limits on every process of the sandbox (docs/sandbox.md).',
        ),
      }),
    ])
    .optional(),
  'Sandbox',
  'How the process is confined (docs/sandbox.md). Default: confined (no network, only its ' +
    'own files, limits). "none" runs it with Barbican\'s own rights.',
)

/** A local MCP server started as a child process; recognized by its `command` key. */
export const stdioUpstreamSchema = doc(
  z.strictObject({
    command: doc(
      z.string().min(1),
      'Command',
      'Program to run, found on PATH or given as a path (relative paths resolve against the ' +
        'working directory of the process).',
    ),
    args: doc(z.array(scalar).default([]), 'Arguments', 'Command-line arguments. Default: [].'),
    env: doc(
      z.record(z.string().min(1), scalar).default({}),
      'Environment',
      'The process environment: these variables plus PATH, HOME, proxies, CA files, locale ' +
        "and timezone (docs/configuration.md); nothing else of Barbican's environment is " +
        `passed on. Write "\${VAR}" to pass a variable through. Default: {}.`,
    ),
    cwd: doc(
      z.string().min(1).optional(),
      'Working directory',
      "Directory the process starts in; relative paths resolve against the config file's " +
        "directory. Default: Barbican's working directory.",
    ),
    lazy: doc(
      z.boolean().default(false),
      'Lazy start',
      'Start the process at the first call that needs it rather than at gateway start. ' +
        'Default: false.',
    ),
    idleTimeoutMs: doc(
      z
        .int()
        .min(0)
        .max(7 * HOURS_24)
        .default(0),
      'Idle timeout (ms)',
      'Stop the process after this long without calls (it restarts on demand); 0 keeps it ' +
        'running. Default: 0.',
    ),
    requestTimeoutMs: requestTimeout,
    sessions,
    trust: trustSchema,
    credentials: credentials,
    sandbox,
  }),
  'Stdio upstream',
  'A local MCP server that Barbican starts and talks to over stdin/stdout.',
)

/** A remote MCP server; recognized by its `url` key. */
export const remoteUpstreamSchema = doc(
  z.strictObject({
    url: doc(
      z.url({ protocol: /^(https?|wss?)$/ }),
      'URL',
      'Endpoint of the server: http(s):// for Streamable HTTP or SSE, ws(s):// for WebSocket.',
    ),
    transport: doc(
      z.enum(['auto', 'streamable-http', 'sse', 'websocket']).default('auto'),
      'Transport',
      'auto tries Streamable HTTP and falls back to the legacy HTTP+SSE transport ' +
        '(WebSocket for ws:// URLs). Default: auto.',
    ),
    headers: doc(
      z.record(z.string().regex(HEADER_NAME_PATTERN), scalar).default({}),
      'Headers',
      'HTTP headers sent with every request to this server, e.g. Authorization: "Bearer ' +
        `\${TOKEN}". Client credentials are never forwarded. Default: {}.`,
    ),
    requestTimeoutMs: requestTimeout,
    sessions,
    trust: trustSchema,
    credentials: credentials,
  }),
  'Remote upstream',
  'An MCP server reached over the network.',
)

/** A Wasm module run in-process with Extism; recognized by its `wasm` key (ADR 036). */
export const wasmUpstreamSchema = doc(
  z.strictObject({
    wasm: doc(
      z
        .string()
        .min(1)
        .refine((v) => !/^[a-z][a-z0-9+.-]*:\/\//i.test(v) || /^https:\/\//i.test(v), {
          message: 'a Wasm module URL must use https://',
        }),
      'Wasm module',
      "Path of the module (relative paths resolve against the config file's directory) or its " +
        'https:// URL. Its SHA-256 must be pinned in barbican.lock (`barbican lock`).',
    ),
    allowedHosts: doc(
      z.array(z.string().min(1)).default([]),
      'Allowed hosts',
      'Hosts the module may reach with HTTP requests (`*.example.com` matches subdomains); ' +
        'loopback and private addresses only when listed. Default: [] (no network).',
    ),
    allowedPaths: doc(
      z.record(z.string().min(1), z.string().min(1)).default({}),
      'Allowed paths',
      'Host directories the module may use, each mapped to the path it sees it at. ' +
        'Default: {} (no files).',
    ),
    config: doc(
      z.record(z.string().min(1), scalar).default({}),
      'Module config',
      "Values the module reads with Extism's config_get. Default: {}.",
    ),
    maxMemoryMb: doc(
      z.int().min(1).max(4096).default(64),
      'Memory limit (MiB)',
      'The module must declare a memory maximum no larger than this, or it is refused. ' +
        'Default: 64.',
    ),
    maxModuleBytes: doc(
      z
        .int()
        .min(1)
        .max(1024 * 1024 * 1024)
        .default(50 * 1024 * 1024),
      'Module size limit (bytes)',
      'Largest module read or downloaded. Default: 52428800 (50 MiB).',
    ),
    requestTimeoutMs: doc(
      positiveMs.optional(),
      'Request timeout (ms)',
      'Longest one call into the module may run; past it the module is stopped. ' +
        'Default: limits.upstreamRequestTimeoutMs (60000).',
    ),
    trust: trustSchema,
  }),
  'Wasm upstream',
  'An MCP servlet compiled to WebAssembly (exports describe and call), run in-process with Extism.',
)

/** Any kind; which one is decided by the presence of `command`, `url` or `wasm`. */
export const upstreamSchema = z.union([
  stdioUpstreamSchema,
  remoteUpstreamSchema,
  wasmUpstreamSchema,
])
