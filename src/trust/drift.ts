/**
 * Configuration drift: the running configuration (and lockfile) compared with the baseline an
 * operator approved. Secrets are never stored: environment values, header values and anything
 * named like a secret are replaced by a short hash, so a rotated secret shows as changed
 * without revealing either value.
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import type { Config } from '../config/config.ts'
import type { Baseline, BaselineStore } from '../store/store.ts'
import { canonicalHash } from './canonical.ts'
import { diffDefinitions, type FieldChange } from './diff.ts'

/** The baseline's name in the store. */
export const CONFIG_BASELINE = 'config'

const SECRET_KEY = /secret|token|password|passphrase|authorization|api[-_]?key|credential|cookie/i

/** The configuration as compared: keyed by names, secrets hashed, the lockfile hashed. */
export function configDocument(config: Config, lockfilePath?: string): Record<string, unknown> {
  const upstreams = Object.fromEntries(
    config.upstreams.map((u) => {
      const { name, ...rest } = u
      const value: Record<string, unknown> = { ...rest }
      if ('env' in u) value.env = hashValues(u.env)
      if ('headers' in u) value.headers = hashValues(u.headers)
      return [name, redact(value)]
    }),
  )
  const servers = Object.fromEntries(config.servers.map(({ name, ...rest }) => [name, rest]))
  const { upstreams: _u, servers: _s, ...top } = config
  const lock =
    lockfilePath !== undefined && existsSync(lockfilePath)
      ? { lockfile: digest(readFileSync(lockfilePath)) }
      : {}
  const rest = redact(top) as Record<string, unknown>
  return JSON.parse(JSON.stringify({ ...rest, upstreams, servers, ...lock }))
}

/** Records the current configuration as the approved baseline. */
export async function approveBaseline(
  store: BaselineStore,
  document: Record<string, unknown>,
  actor: string,
): Promise<Baseline> {
  const baseline: Baseline = {
    name: CONFIG_BASELINE,
    hash: canonicalHash(document),
    document,
    approvedAt: new Date().toISOString(),
    approvedBy: actor,
  }
  await store.put(baseline)
  return baseline
}

/** Differences from the approved baseline; undefined when none was approved yet. */
export async function configDrift(
  store: BaselineStore,
  document: Record<string, unknown>,
): Promise<{ baseline: Baseline; changes: FieldChange[] } | undefined> {
  const baseline = await store.get(CONFIG_BASELINE)
  if (!baseline) return undefined
  if (baseline.hash === canonicalHash(document)) return { baseline, changes: [] }
  return { baseline, changes: diffDefinitions(baseline.document, document) }
}

function hashValues(values: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, digest(v)]))
}

function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redact)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [
      k,
      SECRET_KEY.test(k) && typeof v === 'string' ? digest(v) : redact(v),
    ]),
  )
}

function digest(value: string | Buffer): string {
  return `sha256:${createHash('sha256').update(value).digest('hex').slice(0, 16)}`
}
