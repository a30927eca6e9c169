/**
 * Opaque cursors for merged lists. Barbican fetches every page from every upstream and merges
 * them, then serves the merge in pages of its own: a cursor names the list and the offset into
 * the merged order, which is stable between calls (configuration order, then upstream order).
 */
import { BarbicanError } from '../common/errors.ts'

export function encodeCursor(list: string, offset: number): string {
  return Buffer.from(JSON.stringify({ l: list, o: offset })).toString('base64url')
}

/** The offset a cursor points at; 0 without a cursor. A cursor from another list is invalid. */
export function decodeCursor(cursor: unknown, list: string): number {
  if (cursor === undefined) return 0
  if (typeof cursor === 'string') {
    try {
      const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
      if (typeof value === 'object' && value !== null) {
        const { l, o } = value as { l?: unknown; o?: unknown }
        if (l === list && typeof o === 'number' && Number.isSafeInteger(o) && o >= 0) return o
      }
    } catch {
      // Fall through to the error below.
    }
  }
  throw new BarbicanError('ERR_INVALID_PARAMS', `Invalid cursor for ${list}`)
}
