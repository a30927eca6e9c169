/**
 * The policies a gateway runs now, replaced whole by a configuration reload (ADR 037,
 * "Amended (policies, live)"). A call takes the generation current when it enters the chain and
 * keeps it to its end, so no call is judged half by one configuration and half by the next;
 * every call that enters after a swap, in every open session, runs the new generation. A
 * replaced generation is closed (each policy's `close`) once the last call that took it ends.
 */
import { compose } from './chain.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'

/** One set of policies, as one reload (or the start) built it. */
export class PolicyGeneration {
  readonly policies: readonly Policy[]
  /** Calls that entered this generation and have not ended. */
  #calls = 0
  #retired = false
  #closed: Promise<void> | undefined
  /** The audit policy of this generation, when there is one (looked up once). */
  readonly audit: Policy | undefined

  constructor(policies: readonly Policy[]) {
    this.policies = policies
    this.audit = policies.find((p) => p.name === 'audit')
  }

  /** Calls in flight on this generation (tests, and the reload log). */
  get calls(): number {
    return this.#calls
  }

  /** Settles once this generation's policies are closed; undefined while it may still serve. */
  get closed(): Promise<void> | undefined {
    return this.#closed
  }

  /** Runs `work` as one call of this generation: a retired one closes when its last call ends. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    this.enter()
    try {
      return await work()
    } finally {
      this.leave()
    }
  }

  /**
   * `run` in two halves, for a caller that awaits the call itself (relay/steps.ts): a call
   * enters, and leaves once it has ended, whatever its outcome. Saves the hot path a closure,
   * an async function and a turn of the microtask queue per call.
   */
  enter(): void {
    this.#calls++
  }

  leave(): void {
    this.#calls--
    if (this.#retired && this.#calls === 0) this.#close()
  }

  /** No new call enters; closes now when none is in flight, else when the last one ends. */
  retire(): void {
    this.#retired = true
    if (this.#calls === 0) this.#close()
  }

  #close(): void {
    this.#closed ??= Promise.allSettled(this.policies.map(async (p) => await p.close?.())).then(
      () => {},
    )
  }
}

export class LivePolicies {
  #current: PolicyGeneration

  constructor(policies: readonly Policy[]) {
    this.#current = new PolicyGeneration(policies)
  }

  /** The generation a call entering now takes. */
  get current(): PolicyGeneration {
    return this.#current
  }

  /**
   * Makes `policies` the chain of every call from now on and retires the replaced generation;
   * returns it (its `closed` settles once its calls have ended).
   */
  swap(policies: readonly Policy[]): PolicyGeneration {
    const replaced = this.#current
    this.#current = new PolicyGeneration(policies)
    replaced.retire()
    return replaced
  }
}

/**
 * A composed chain around a relay, composed again only when the generation changed (composing
 * costs a closure per policy, too much to pay on every call). The gateway holds one for every
 * client it serves (ADR 135): a stateless 2026-07-28 request, a client of its own, composes
 * nothing; the relay finds the client in the call (`Call.sender`).
 */
export class LiveChain {
  readonly #live: LivePolicies
  readonly #relay: Next
  #generation: PolicyGeneration | undefined
  #chain: Next | undefined

  constructor(live: LivePolicies, relay: Next) {
    this.#live = live
    this.#relay = relay
  }

  /** The generation a call entering now takes. */
  get current(): PolicyGeneration {
    return this.#live.current
  }

  /** Runs `call` through the current generation's chain, to its end on that generation. */
  run(call: Call): Promise<Reply> {
    const generation = this.#live.current
    const chain = this.composedFor(generation)
    return generation.run(() => chain(call))
  }

  /**
   * The chain of `generation` (the current one, taken by the caller), composed again only when
   * the generation changed. A caller that runs it counts its call in the generation itself
   * (`enter`, then `leave` once the call ended), as `run` does.
   */
  composedFor(generation: PolicyGeneration): Next {
    if (generation !== this.#generation || this.#chain === undefined) {
      this.#generation = generation
      this.#chain = compose(generation.policies, this.#relay)
    }
    return this.#chain
  }
}
