/**
 * What a gateway's policies keep across configuration reloads (ADR 037, "Amended (policies,
 * live)"): built by the first plan that needs it and reused by every later plan of the same
 * gateway (the main one, or one tenant's), so swapping the chain never resets quota counters,
 * never forgets which confirmations were answered (a replayed accept would pass), never unseals
 * the questions 2026-07-28 clients are answering, and never forgets the labels secure contexts
 * hold (a trifecta would pass).
 */
import { RequestStateSealer } from '../bridge/request-state.ts'
import type { AnswerLedger } from '../policies/answer-ledger.ts'
import { confirmStateKey } from '../policies/confirm.ts'
import type { RateCounterStore } from '../policies/rate-counter-store.ts'
import type { HeldLabels } from '../policies/secure-contexts.ts'
import { answerLedgerOf, type Backends, rateCounterStoreOf } from './backends.ts'

export class PolicyState {
  #counters: RateCounterStore | undefined
  #answers: AnswerLedger | undefined
  #sealer: RequestStateSealer | undefined
  readonly #labels: HeldLabels = new Map()

  /**
   * The quota counters: each limit's key holds its count across reloads; a limit whose numbers
   * changed keeps the calls it counted (rate-counter-store.ts).
   */
  rateCounters(backends: Backends): RateCounterStore {
    this.#counters ??= rateCounterStoreOf(backends)
    return this.#counters
  }

  /** The answered confirmations (single use). */
  answers(backends: Backends): AnswerLedger {
    this.#answers ??= answerLedgerOf(backends)
    return this.#answers
  }

  /** Seals confirmation questions: one answered after a reload still opens. */
  get confirmSealer(): RequestStateSealer {
    this.#sealer ??= new RequestStateSealer(confirmStateKey())
    return this.#sealer
  }

  /** The labels that entered each secure context. */
  get heldLabels(): HeldLabels {
    return this.#labels
  }
}
