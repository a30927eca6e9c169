/**
 * What Barbican remembers between runs, as small asynchronous interfaces so that the embedded
 * SQLite backend can later be joined by PostgreSQL without touching their callers. Values are
 * plain JSON data; backends store them as they are and never interpret a definition.
 */

/** What a pin covers: one advertised item of an upstream, or the server's own text. */
export type PinKind = 'tool' | 'prompt' | 'resourceTemplate' | 'instructions' | 'identity'

/** One item of an upstream and a definition seen for it: what pins and pending changes share. */
export interface ItemDefinition {
  readonly upstream: string
  /** `kind:name`, unique within the upstream (`tool:echo`, `instructions:`). */
  readonly key: string
  readonly kind: PinKind
  readonly name: string
  /** SHA-256 of the canonical JSON of `definition`, hex. */
  readonly hash: string
  readonly definition: unknown
}

/** An approved definition: the upstream may advertise exactly this and nothing else for `key`. */
export interface PinnedItem extends ItemDefinition {
  /** ISO 8601. */
  readonly approvedAt: string
  /** `first-sight` for trust on first use, otherwise the operator who approved. */
  readonly approvedBy: string
}

/** Why an item waits for an operator. */
export type PendingReason = 'changed' | 'new' | 'scan'

/** A definition seen but not approved: quarantined (or only warned about) until decided. */
export interface PendingChange extends ItemDefinition {
  /** The approved hash this change departs from; null for an item never approved. */
  readonly previousHash: string | null
  readonly reason: PendingReason
  /** Scan findings on this definition (JSON, see trust/scan.ts). */
  readonly findings: readonly unknown[]
  /** `rejected` keeps a refused definition quarantined without asking again. */
  readonly status: 'pending' | 'rejected'
  readonly seenAt: string
  readonly decidedAt?: string
  readonly decidedBy?: string
}

/** What happened to a pin; the history is append-only. */
export type PinAction = 'trusted' | 'changed' | 'new' | 'flagged' | 'approved' | 'rejected'

export interface PinEvent {
  readonly upstream: string
  readonly key: string
  readonly action: PinAction
  readonly hash: string
  readonly previousHash: string | null
  readonly actor: string
  readonly at: string
}

/** Pins, pending changes and their history. */
export interface PinStore {
  /** Approved pins, of one upstream or all, ordered by upstream then key. */
  pinned(upstream?: string): Promise<PinnedItem[]>
  /** Pending and rejected changes, of one upstream or all, ordered by upstream then key. */
  pending(upstream?: string): Promise<PendingChange[]>
  /** Stores or replaces the approved pin of `item.key`. */
  pin(item: PinnedItem): Promise<void>
  /** Removes an approved pin (no-op when absent). */
  unpin(upstream: string, key: string): Promise<void>
  /** Stores or replaces the pending change of `change.key`. */
  propose(change: PendingChange): Promise<void>
  /** Removes the pending change of a key (no-op when absent). */
  dismiss(upstream: string, key: string): Promise<void>
  /** Appends to the history. */
  record(event: PinEvent): Promise<void>
  /** The history, oldest first, optionally of one upstream and key. */
  history(filter?: { readonly upstream?: string; readonly key?: string }): Promise<PinEvent[]>
  /**
   * A number that changes whenever anything in the pin store changes, whichever process wrote
   * it, so a running gateway notices `barbican pins approve` run next to it.
   */
  revision(): Promise<number>
  /**
   * How many writes went through this object, counted in memory: no I/O, no lock. A caller that
   * reads `revision()` less often than on every use (trust/trust-guard.ts) reads it again as soon
   * as this moves, so a decision made in this process takes effect at once; writes by another
   * process show only in `revision()`.
   */
  localWrites(): number
}

/** An approved snapshot of something that may drift (the configuration). */
export interface Baseline {
  readonly name: string
  readonly hash: string
  readonly document: unknown
  readonly approvedAt: string
  readonly approvedBy: string
}

export interface BaselineStore {
  get(name: string): Promise<Baseline | undefined>
  put(baseline: Baseline): Promise<void>
}

/** One backend: every interface over the same storage. */
export interface Store {
  readonly pins: PinStore
  readonly baselines: BaselineStore
  close(): Promise<void>
}
