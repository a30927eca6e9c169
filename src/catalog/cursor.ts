/**
 * Opaque cursors for merged lists. Barbican fetches every page from every upstream and merges
 * them, then serves the merge in pages of its own: a cursor names the list and the offset into
 * the merged order, which is stable between calls (configuration order, then upstream order).
 */
import { BarbicanError } from '../common/errors.ts'

/**
 * A cursor names the view it was minted for (`view`, the caller's key): lists are narrowed per
 * caller, so an offset into one caller's view means nothing in another's, and a cursor handed
 * from one identity to another is refused rather than paging a different list.
 */
export function encodeCursor(list: string, offset: number, view = ''): string {
  return Buffer.from(JSON.stringify({ l: list, o: offset, v: view })).toString('base64url')
}

/**
 * The offset a cursor points at; 0 without a cursor. A cursor from another list, or minted for
 * another view, is invalid.
 */
export function decodeCursor(cursor: unknown, list: string, view = ''): number {
  if (cursor === undefined) return 0
  if (typeof cursor === 'string') {
    try {
      const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
      if (typeof value === 'object' && value !== null) {
        const { l, o, v } = value as { l?: unknown; o?: unknown; v?: unknown }
        const valid = l === list && v === view && typeof o === 'number'
        if (valid && Number.isSafeInteger(o) && o >= 0) return o
      }
    } catch {
      // Fall through to the error below.
    }
  }
  throw new BarbicanError('ERR_INVALID_PARAMS', `Invalid cursor for ${list}`)
}
