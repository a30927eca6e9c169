/**
 * The MCP revisions Barbican speaks and what distinguishes them on the wire.
 * Era: 'legacy' revisions use the initialize handshake and sessions; 'modern' (2026-07-28 on)
 * carries version and capabilities in every request's `_meta` and has no sessions.
 */

export const REVISIONS = [
  '2024-11-05',
  '2025-03-26',
  '2025-06-18',
  '2025-11-25',
  '2026-07-28',
] as const

export type Revision = (typeof REVISIONS)[number]
export type Era = 'legacy' | 'modern'

export const LEGACY_REVISIONS: readonly Revision[] = [
  '2024-11-05',
  '2025-03-26',
  '2025-06-18',
  '2025-11-25',
]
export const MODERN_REVISIONS: readonly Revision[] = ['2026-07-28']
export const LATEST_LEGACY_REVISION: Revision = '2025-11-25'
export const LATEST_REVISION: Revision = '2026-07-28'

/**
 * What a Streamable HTTP server assumes when a legacy client sends no `MCP-Protocol-Version`
 * header and the version cannot be inferred (2025-06-18 transports spec).
 */
export const DEFAULT_HTTP_LEGACY_REVISION: Revision = '2025-03-26'

export function isRevision(value: unknown): value is Revision {
  return typeof value === 'string' && (REVISIONS as readonly string[]).includes(value)
}

export function eraOf(revision: Revision): Era {
  return revision >= '2026-07-28' ? 'modern' : 'legacy'
}

/** Per-revision wire facts that are not about individual methods. */
export interface RevisionTraits {
  readonly era: Era
  /** JSON-RPC batches must be accepted (2025-03-26 only). */
  readonly batching: boolean
  /** Code a server uses for "resource not found". */
  readonly resourceNotFoundCode: number
  /** The `MCP-Protocol-Version` HTTP header is sent after initialization. */
  readonly versionHeader: boolean
  /** JSON Schema dialect of the revision's schema.json. */
  readonly schemaDialect: 'draft-07' | '2020-12'
}

export const TRAITS: Readonly<Record<Revision, RevisionTraits>> = {
  '2024-11-05': {
    era: 'legacy',
    batching: false,
    resourceNotFoundCode: -32002,
    versionHeader: false,
    schemaDialect: 'draft-07',
  },
  '2025-03-26': {
    era: 'legacy',
    batching: true,
    resourceNotFoundCode: -32002,
    versionHeader: false,
    schemaDialect: 'draft-07',
  },
  '2025-06-18': {
    era: 'legacy',
    batching: false,
    resourceNotFoundCode: -32002,
    versionHeader: true,
    schemaDialect: 'draft-07',
  },
  '2025-11-25': {
    era: 'legacy',
    batching: false,
    resourceNotFoundCode: -32002,
    versionHeader: true,
    schemaDialect: '2020-12',
  },
  '2026-07-28': {
    era: 'modern',
    batching: false,
    resourceNotFoundCode: -32602,
    versionHeader: true,
    schemaDialect: '2020-12',
  },
}

/**
 * Picks the revision a legacy server answers `initialize` with: the requested one when known,
 * else the newest legacy revision (the spec lets the client disconnect if it cannot speak it).
 */
export function negotiateLegacy(requested: unknown): Revision {
  if (isRevision(requested) && eraOf(requested) === 'legacy') return requested
  // 2024-10-07 predates the published spec; the TS SDK accepts it; treat it as 2024-11-05.
  if (requested === '2024-10-07') return '2024-11-05'
  return LATEST_LEGACY_REVISION
}
