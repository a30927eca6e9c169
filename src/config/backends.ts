/**
 * PostgreSQL and Redis: where a fleet of replicas keeps what they share (ADR 055). Set in the
 * file (`store: { postgres: … }`, `redis: …`) or by `BARBICAN_POSTGRES_URL` and
 * `BARBICAN_REDIS_URL`, which win over the file so that a deployment injects them as secrets.
 * A URL is checked here for its scheme and host only; it may hold a password, so no message
 * ever repeats it.
 */
import { z } from 'zod'
import { POSTGRES_SCHEMES, REDIS_SCHEMES, urlProblem } from '../common/backend-urls.ts'
import type { ConfigIssue, KeyPath } from './config-error.ts'
import { DEFAULT_QUOTA_LEASE_MS } from './defaults.ts'

export { POSTGRES_SCHEMES, REDIS_SCHEMES }

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

export const POSTGRES_URL_ENV = 'BARBICAN_POSTGRES_URL'
export const REDIS_URL_ENV = 'BARBICAN_REDIS_URL'
/** What every Redis key of Barbican starts with unless `redis.prefix` says otherwise. */
export const DEFAULT_REDIS_PREFIX = 'barbican:'

const urlOf = (schemes: readonly string[]) =>
  z.string().superRefine((value, ctx) => {
    const problem = urlProblem(value, schemes)
    // The value may carry a password: the message names the fault, never the URL.
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem, input: '' })
  })

/** `store: { postgres: … }`. */
export const postgresStoreSchema = doc(
  z.strictObject({
    url: doc(
      urlOf(POSTGRES_SCHEMES),
      'URL',
      `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE. ${POSTGRES_URL_ENV} overrides it; write ` +
        `"\${VAR}" to read it from another variable.`,
    ),
    migrate: doc(
      z.boolean().default(true),
      'Migrate at start',
      'Bring the schema up to date when the gateway starts. false: only `barbican migrate` ' +
        'does, and a gateway facing an older schema refuses to start. Default: true.',
    ),
  }),
  'PostgreSQL',
  'Durable state (pins, history, baselines, approvals, audit log, linked tokens) in ' +
    'PostgreSQL, shared by every replica given the same URL (docs/configuration.md).',
)

/** Top-level `redis:`. */
export const redisSchema = doc(
  z.strictObject({
    url: doc(
      urlOf(REDIS_SCHEMES),
      'URL',
      `redis[s]://[USER:PASSWORD@]HOST[:PORT][/DB]. ${REDIS_URL_ENV} overrides it.`,
    ),
    prefix: doc(
      z.string().min(1).max(64).default(DEFAULT_REDIS_PREFIX),
      'Key prefix',
      `What every key Barbican writes starts with, so gateways can share a Redis. Default: ${DEFAULT_REDIS_PREFIX}`,
    ),
    quotaLeaseMs: doc(
      z.int().min(0).max(1000).default(DEFAULT_QUOTA_LEASE_MS),
      'Quota lease life (ms)',
      'How long a replica may hold quota tokens it reserved from Redis for a busy key, to admit ' +
        'its calls without a round trip each (ADR 085, docs/policy.md). Unused tokens go back ' +
        'when the lease ends; a replica that dies loses at most its outstanding leases. 0: ' +
        `every call under a quota takes its token from Redis. Default: ${DEFAULT_QUOTA_LEASE_MS}.`,
    ),
  }),
  'Redis',
  'State shared between replicas (rate-limit counters, …) in Redis instead of process memory. ' +
    'Default: none.',
)

/** The resolved `redis:`. */
export interface RedisConfig {
  readonly url: string
  readonly prefix: string
  /** How long a quota lease lives, ms; 0: none; absent: DEFAULT_QUOTA_LEASE_MS (ADR 085). */
  readonly quotaLeaseMs?: number | undefined
}

/** A variable that is set but unusable, as a config issue at the variable's name. */
export function envUrlIssue(
  name: string,
  value: string,
  schemes: readonly string[],
): ConfigIssue | undefined {
  const problem = urlProblem(value, schemes)
  const path: KeyPath = [name]
  return problem === undefined ? undefined : { path, message: problem }
}
