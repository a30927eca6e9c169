/**
 * What one caller may buy with the tools that cost more than a relayed call (ADR 105):
 * `search_tools` ranks the whole catalogue on the main thread, and `run_code` runs a program
 * that makes up to `code.maxCalls` calls. Each search is bounded (words, synonyms, results,
 * time: tool-search.ts `SearchBounds`), and each caller gets a token bucket of these calls per
 * virtual server, counted in this process.
 */
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import type { LimitsConfig } from '../config/config.ts'
import { DEFAULT_LIMITS } from '../config/defaults.ts'
import type { SearchBounds } from '../exposure/tool-search.ts'
import {
  MemoryRateCounterStore,
  type RateCounterStore,
  type RateRule,
} from '../policies/rate-counter-store.ts'

export interface MetaToolLimits {
  readonly search: SearchBounds
  /** The largest `limit` a search may ask for. */
  readonly maxResults: number
  /** Meta-tool calls per caller per minute, per virtual server. */
  readonly perMinute: number
}

/** The limits as configured (`limits.search*`, `limits.metaToolCallsPerMinute`). */
export function metaToolLimitsOf(
  limits: Pick<
    LimitsConfig,
    | 'searchMaxTerms'
    | 'searchMaxExpansions'
    | 'searchMaxResults'
    | 'searchBudgetMs'
    | 'metaToolCallsPerMinute'
  > = DEFAULT_LIMITS,
): MetaToolLimits {
  return {
    search: {
      maxTerms: limits.searchMaxTerms,
      maxExpansions: limits.searchMaxExpansions,
      budgetMs: limits.searchBudgetMs,
    },
    maxResults: limits.searchMaxResults,
    perMinute: limits.metaToolCallsPerMinute,
  }
}

/** Admits or refuses each meta-tool call of a caller, gateway-wide (every session shares it). */
export class MetaToolGate {
  readonly limits: MetaToolLimits
  readonly #store: RateCounterStore
  readonly #rule: RateRule

  constructor(limits: MetaToolLimits, store: RateCounterStore = new MemoryRateCounterStore()) {
    this.limits = limits
    this.#store = store
    this.#rule = { algorithm: 'token-bucket', limit: limits.perMinute, windowMs: 60_000 }
  }

  /** Counts one call of `tool` by `identity` on `server`; ERR_RATE_LIMITED beyond the rate. */
  async admit(server: string, identity: Identity, tool: string): Promise<void> {
    // JSON keeps the parts apart whatever characters a subject or client id holds.
    const key = JSON.stringify([
      'meta-tools',
      server,
      identity.tenant ?? '',
      identity.subject,
      identity.client ?? '',
    ])
    const decision = await this.#store.take(key, this.#rule, Date.now())
    if (decision.allowed) return
    const retryAfterSeconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000))
    throw new BarbicanError(
      'ERR_RATE_LIMITED',
      `Too many search_tools and run_code calls: at most ${this.limits.perMinute} per minute per caller (limits.metaToolCallsPerMinute); ${tool} refused, retry after ${retryAfterSeconds}s`,
      {
        data: {
          limit: 'limits.metaToolCallsPerMinute',
          retryAfterMs: decision.retryAfterMs,
          retryAfterSeconds,
        },
      },
    )
  }
}
