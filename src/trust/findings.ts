/**
 * What the poisoning and imitation scans report: one finding per problem with one advertised
 * item, and its severity. Its own module so the scans (scan.ts, imitation.ts) and what acts on
 * their findings (trust-guard.ts, `barbican scan`) share the types without importing each other.
 */
import type { PinKind } from '../store/store.ts'
import type { SurfaceItem } from './surface.ts'

export type Severity = 'low' | 'medium' | 'high' | 'critical'

/** Severities that `scan: quarantine` hides; lower ones are only reported. */
export const QUARANTINE_SEVERITIES: ReadonlySet<Severity> = new Set(['high', 'critical'])

export type ScanRule =
  | 'hidden-unicode'
  | 'model-directive'
  | 'shadowing'
  | 'suspicious-url'
  | 'oversized'
  | 'name-collision'
  | 'name-imitation'
  | 'invalid-name'

/** One problem with one advertised item. */
export interface Finding {
  readonly upstream: string
  readonly kind: PinKind
  readonly name: string
  readonly key: string
  readonly rule: ScanRule
  readonly severity: Severity
  readonly message: string
  /** Where in the definition (dotted path), when it is one field. */
  readonly field?: string
}

/** The surface of one upstream, as scanned. */
export interface ScannedUpstream {
  readonly upstream: string
  readonly items: readonly SurfaceItem[]
}
