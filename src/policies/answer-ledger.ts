/**
 * Which confirmation questions have been answered: a sealed 2026-07-28 question is answered
 * once (no replay of an accept). In one process the ledger is a map; in a fleet (Redis
 * configured) it is one Redis key per question, set with NX and the question's expiry, so an
 * answer replayed to another replica is refused there too. Redis that cannot be reached refuses
 * the answer (fail closed): the client is asked again on its next call.
 */
import { BarbicanError } from '../common/errors.ts'
import type { RedisClient } from '../store/redis.ts'

export interface AnswerLedger {
  /** True the first time `nonce` is claimed before `expiresAt` (epoch ms); false after. */
  claim(nonce: string, expiresAt: number): Promise<boolean>
}

/** This process's answers, each forgotten when its question has expired. */
export class MemoryAnswerLedger implements AnswerLedger {
  readonly #answered = new Map<string, number>()

  async claim(nonce: string, expiresAt: number): Promise<boolean> {
    const now = Date.now()
    for (const [n, e] of this.#answered) if (e <= now) this.#answered.delete(n)
    if (this.#answered.has(nonce)) return false
    this.#answered.set(nonce, expiresAt)
    return true
  }
}

/** The fleet's answers: `SET <prefix>answered:<nonce> 1 NX PXAT <expiry>`, one round trip. */
export class RedisAnswerLedger implements AnswerLedger {
  readonly #client: RedisClient
  readonly #prefix: string

  constructor(client: RedisClient, prefix: string) {
    this.#client = client
    this.#prefix = prefix
  }

  async claim(nonce: string, expiresAt: number): Promise<boolean> {
    // An expired question is refused by its seal already; a key needs a future expiry all the same.
    const at = Math.max(expiresAt, Date.now() + 1000)
    try {
      const set = await this.#client.set(`${this.#prefix}answered:${nonce}`, '1', {
        condition: 'NX',
        expiration: { type: 'PXAT', value: at },
      })
      return set === 'OK'
    } catch (err) {
      throw new BarbicanError(
        'ERR_STORE_UNAVAILABLE',
        'The fleet cannot tell whether this confirmation was answered already (Redis unavailable); call again',
        { cause: err },
      )
    }
  }
}
