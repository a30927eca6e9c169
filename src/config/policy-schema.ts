/**
 * The `rateLimits` and `guards` sections of the native file (docs/policy.md): quotas per
 * subject, tenant, upstream and tool, and the checks on tool arguments and results.
 */
import { z } from 'zod'

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

const globs = (what: string) =>
  doc(z.array(z.string().min(1)).min(1).optional(), what, `${what} counted, by glob. Default: all.`)

const rateLimit = z.strictObject({
  per: doc(
    z
      .array(z.enum(['subject', 'tenant', 'upstream', 'tool']))
      .refine((dims) => new Set(dims).size === dims.length, 'each dimension at most once')
      .default([]),
    'Counted per',
    'What each counter is keyed by: "subject", "tenant", "upstream", "tool" (exposed name), in ' +
      'any combination; the virtual server is always part of the key. Default: [] (one counter ' +
      'for every matching call on the server).',
  ),
  limit: doc(z.int().min(1).max(1_000_000_000), 'Limit', 'Calls allowed per window.'),
  windowMs: doc(
    z
      .int()
      .min(1)
      .max(31 * 24 * 60 * 60_000),
    'Window (ms)',
    'The window `limit` applies to.',
  ),
  algorithm: doc(
    z.enum(['token-bucket', 'fixed-window']).default('token-bucket'),
    'Algorithm',
    '"token-bucket": bursts up to `limit`, refilled evenly over `windowMs`. "fixed-window": ' +
      '`limit` calls per window, reset when the window ends. Default: token-bucket.',
  ),
  methods: doc(
    z.array(z.string().min(1)).min(1).default(['tools/call']),
    'Methods',
    'JSON-RPC methods counted. Default: ["tools/call"].',
  ),
  servers: globs('Virtual servers'),
  upstreams: globs('Upstreams'),
  tools: globs('Tools'),
})

export const rateLimitsSchema = doc(
  z.record(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/), rateLimit),
  'Rate limits',
  'Quotas by name. A call over any of them is refused with ERR_RATE_LIMITED (JSON-RPC -32029, ' +
    'retry-after in data; HTTP 429 with Retry-After for a 2026-07-28 request). Default: none.',
)

const mode = (what: string, extra: string) =>
  doc(
    z.enum(['off', 'warn', 'enforce']).default('off'),
    what,
    `"enforce" refuses, "warn" logs and passes, "off" skips. ${extra} Default: off.`,
  )

const pattern = z.string().superRefine((source, ctx) => {
  try {
    new RegExp(source, 'g')
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a regular expression: ${(err as Error).message}` })
  }
})

export const guardsSchema = doc(
  z.strictObject({
    arguments: mode(
      'Argument validation',
      "Arguments of tools/call are validated against the tool's inputSchema before forwarding.",
    ),
    output: mode(
      'Output validation',
      "structuredContent is validated against the tool's outputSchema; isError results never.",
    ),
    maxResultBytes: doc(
      z
        .int()
        .min(64)
        .max(1024 * 1024 * 1024)
        .optional(),
      'Max result bytes',
      'Largest tools/call result, in bytes of its JSON. Default: no limit.',
    ),
    maxResultTokens: doc(
      z.int().min(16).max(1_000_000_000).optional(),
      'Max result tokens',
      'Largest tools/call result in estimated tokens (characters of its JSON / 4). Default: no limit.',
    ),
    oversize: doc(
      z.enum(['truncate', 'error']).default('truncate'),
      'Oversize results',
      '"truncate" cuts text content and adds a note; "error" refuses with ERR_RESULT_TOO_LARGE. ' +
        'Default: truncate.',
    ),
    redact: doc(
      z.boolean().default(true),
      'Redact secrets',
      'Replace private key blocks, AWS access keys, GitHub tokens, JWTs and bearer tokens in ' +
        'tool results with [REDACTED:kind]. Default: true.',
    ),
    redactPatterns: doc(
      z.array(pattern).default([]),
      'Extra redaction patterns',
      'JavaScript regular expressions whose matches are redacted too (kind "custom-N"). ' +
        'Default: none.',
    ),
  }),
  'Guards',
  'Checks on tools/call arguments and results (docs/policy.md). Default: none.',
)
