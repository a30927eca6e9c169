/**
 * How soon Barbican tries an upstream again after it failed or died. The first retry is
 * immediate (a crash is usually a one-off); after that the delay doubles from a base up to a
 * cap, so a server that keeps dying is not hammered. A connection that stayed up long enough
 * counts as healthy again and resets the count.
 */

/** The delay before the second retry; each later one doubles it. */
export const RECONNECT_BASE_MS = 250
/** The longest delay between two attempts. */
export const RECONNECT_CAP_MS = 30_000
/** A connection that lived this long resets the failure count when it dies. */
export const STABLE_AFTER_MS = 10_000

/** The delay before the next attempt after `failures` consecutive failures (counting this one). */
export function reconnectDelay(failures: number): number {
  return failures <= 1 ? 0 : Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** (failures - 2))
}
