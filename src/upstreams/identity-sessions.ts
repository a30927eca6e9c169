/**
 * Per-identity legacy sessions toward one upstream (`sessionScope: 'identity'`): each caller
 * identity gets its own connection with its own `initialize` (and for stdio its own process),
 * so upstream state and upstream→client requests never mix between users.
 */
import type { UpstreamClient } from './upstream-client.ts'

/** How long an unused per-identity legacy session stays open. */
const IDENTITY_SESSION_IDLE_MS = 300_000

/**
 * The open per-identity sessions of one upstream, by identity key. Each is opened on first use
 * and closed after IDENTITY_SESSION_IDLE_MS unused (never while a request is in flight).
 */
export class IdentitySessions {
  #open: () => Promise<UpstreamClient>
  #sessions = new Map<string, Promise<UpstreamClient>>()
  #timers = new Map<string, NodeJS.Timeout>()

  /** `open` connects and runs the handshake, closing what it opened if that fails. */
  constructor(open: () => Promise<UpstreamClient>) {
    this.#open = open
  }

  /** The session of identity `key`, opened (or reopened after it closed) if needed. */
  async get(key: string): Promise<UpstreamClient> {
    let opening = this.#sessions.get(key)
    const open = opening ? await opening.catch(() => undefined) : undefined
    if (!open || open.closed) {
      opening = this.#open()
      this.#sessions.set(key, opening)
      opening.catch(() => this.#sessions.delete(key))
    }
    const client = await opening!
    clearTimeout(this.#timers.get(key))
    const timer = setTimeout(() => {
      if (client.inFlight > 0) return
      this.#sessions.delete(key)
      this.#timers.delete(key)
      void client.close()
    }, IDENTITY_SESSION_IDLE_MS)
    timer.unref()
    this.#timers.set(key, timer)
    return client
  }

  /** Closes every session and forgets them (the upstream is stopping). */
  async closeAll(): Promise<void> {
    for (const timer of this.#timers.values()) clearTimeout(timer)
    const own = [...this.#sessions.values()]
    this.#sessions.clear()
    await Promise.allSettled(own.map(async (c) => (await c).close()))
  }
}
