/**
 * The `rate-limit` policy: quotas per subject, tenant, upstream and tool. Each configured limit
 * picks the calls it counts (methods, and optionally servers, upstreams, tools by glob) and the
 * dimensions it counts them by (`per`); a call over any limit is refused with ERR_RATE_LIMITED,
 * whose data carries the retry-after, before it reaches authorization or an upstream. Installed
 * only when limits are configured, so a gateway without quotas pays nothing per call.
 */
import picomatch from 'picomatch'
import { BarbicanError } from '../common/errors.ts'
import type { RateLimitConfig } from '../config/config.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'
import type { RateCounterStore, RateTake } from './rate-counter-store.ts'

interface CompiledLimit {
  readonly config: RateLimitConfig
  readonly methods: ReadonlySet<string>
  readonly server: (name: string) => boolean
  readonly upstream: (name: string) => boolean
  readonly tool: (name: string) => boolean
}

const any = () => true

function compile(config: RateLimitConfig): CompiledLimit {
  const globs = (list: readonly string[] | undefined) =>
    list === undefined ? any : picomatch([...list])
  return {
    config,
    methods: new Set(config.methods),
    server: globs(config.servers),
    upstream: globs(config.upstreams),
    tool: globs(config.tools),
  }
}

/** Stands for a dimension a call lacks (no tenant, no upstream), so such calls count together. */
const NONE = '-'

export function rateLimit(
  limits: readonly RateLimitConfig[],
  store: RateCounterStore,
  now: () => number = Date.now,
): Policy {
  const compiled = limits.map(compile)
  return {
    name: 'rate-limit',
    async handle(call: Call, next: Next): Promise<Reply> {
      const { request, route, identity } = call
      const upstream = route.kind === 'unicast' ? route.upstream : NONE
      const name = request.params?.name
      const tool = request.method === 'tools/call' && typeof name === 'string' ? name : NONE
      const takes: RateTake[] = []
      for (const limit of compiled) {
        if (!limit.methods.has(request.method) || !limit.server(call.server)) continue
        if (limit.config.upstreams !== undefined && !limit.upstream(upstream)) continue
        if (limit.config.tools !== undefined && !limit.tool(tool)) continue
        const values = limit.config.per.map((dimension) =>
          dimension === 'subject'
            ? identity.subject
            : dimension === 'tenant'
              ? (identity.tenant ?? NONE)
              : dimension === 'upstream'
                ? upstream
                : tool,
        )
        // JSON keeps the parts apart whatever characters a subject or tool name holds.
        const key = JSON.stringify([limit.config.name, call.server, ...values])
        takes.push({ key, rule: limit.config })
      }
      // Every applicable limit in one take: one round trip to a shared store, none without one.
      if (takes.length > 0) {
        const decisions = await store.takeAll(takes, now())
        const last = decisions.at(-1)
        if (last !== undefined && !last.allowed) {
          const name = (takes[decisions.length - 1]!.rule as RateLimitConfig).name
          call.decisions?.push({ policy: 'rate-limit', effect: 'deny', rule: `rateLimits.${name}` })
          throw rateLimited(name, last.retryAfterMs)
        }
      }
      return await next(call)
    },
  }
}

function rateLimited(limit: string, retryAfterMs: number): BarbicanError {
  const retryAfterSeconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
  return new BarbicanError(
    'ERR_RATE_LIMITED',
    `Rate limit "${limit}" exceeded; retry after ${retryAfterSeconds}s`,
    { data: { limit, retryAfterMs, retryAfterSeconds } },
  )
}
