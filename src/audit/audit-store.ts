/**
 * Where audit records and checkpoints are kept: a small asynchronous interface, so that the
 * embedded SQLite backend can be joined by PostgreSQL without touching the chain logic above it
 * (audit-log.ts). Backends store records exactly as given and never compute hashes; one contract
 * suite (contract.ts) states what each must do.
 */
import type { AuditRecord } from './record.ts'

/** The end of the chain: the last record, or what a prune left (seq 0: empty log). */
export interface ChainHead {
  readonly seq: number
  readonly hash: string
}

/** Why a checkpoint was signed. */
export type CheckpointReason = 'periodic' | 'shutdown' | 'prune'

/**
 * A signed statement that record `seq` had hash `hash` at `at`, and (ADR 102) that it is
 * checkpoint number `number`, following the checkpoint whose hash is `prev`.
 */
export interface Checkpoint {
  readonly seq: number
  readonly hash: string
  readonly at: string
  readonly reason: CheckpointReason
  /** 1, 2, 3, … with no gaps; absent on a checkpoint signed before ADR 102. */
  readonly number?: number | undefined
  /** `checkpointHash` of checkpoint `number − 1` (64 zeros for the first); absent as `number`. */
  readonly prev?: string | undefined
  /** Which key signed (audit-key.ts `keyId`). */
  readonly keyId: string
  /** Ed25519 signature, base64url, over `checkpointPayload`. */
  readonly signature: string
}

/**
 * Makes the next checkpoint from the head and the last numbered checkpoint, both read in the
 * store's transaction (audit-key.ts `signCheckpoint`).
 */
export type CheckpointBuilder = (head: ChainHead, last: Checkpoint | undefined) => Checkpoint

/** A read of the log; every condition given must hold. */
export interface AuditQuery {
  /** Records with a greater sequence number only. */
  readonly afterSeq?: number | undefined
  readonly subject?: string | undefined
  /** This tenant's records only (docs/tenants.md): its calls and its admins' acts. */
  readonly tenant?: string | undefined
  readonly target?: string | undefined
  readonly outcome?: string | undefined
  /** ISO 8601 bounds on `at`, inclusive. */
  readonly since?: string | undefined
  readonly until?: string | undefined
  readonly limit?: number | undefined
  /**
   * Records whose body is one of these, exactly (the journal replay's question: which of its
   * lines the chain holds already; journal.ts `committedBodies`). Filtered by the backend, so
   * that a replay does not fetch every record of a busy fleet since its journal was created.
   */
  readonly bodies?: readonly string[] | undefined
  /** Newest first (for tail); oldest first by default. */
  readonly newestFirst?: boolean | undefined
}

export interface AuditStore {
  /**
   * Appends what `build` makes from the current head, in one transaction: the head is read
   * inside it, so two processes appending to one log never fork the chain. Durable when the
   * promise settles. `build` must be pure: a backend may call it again with a newer head (the
   * PostgreSQL store builds on the head it last wrote and rebuilds when another writer moved
   * it); only the records of the call whose head held are stored and returned.
   */
  append(build: (head: ChainHead) => readonly AuditRecord[]): Promise<readonly AuditRecord[]>
  head(): Promise<ChainHead>
  read(query?: AuditQuery): Promise<AuditRecord[]>
  /**
   * Stores the checkpoint `build` makes from the head and the last numbered checkpoint, read in
   * the same transaction under the append lock: several writers (replicas, the CLI) number and
   * chain their checkpoints without a fork, and none covers less than the head it read.
   */
  addCheckpoint(build: CheckpointBuilder): Promise<Checkpoint>
  /** Every checkpoint, by sequence number then time. */
  checkpoints(): Promise<Checkpoint[]>
  /**
   * Removes records up to `last.seq` (the newest record to go) and stores the `prune`
   * checkpoint `build` makes of it (given that record as its head), in one transaction, so the
   * remaining chain still starts from a signed hash. Returns how many records were removed and
   * the checkpoint.
   */
  prune(
    last: ChainHead,
    build: CheckpointBuilder,
  ): Promise<{ readonly removed: number; readonly checkpoint: Checkpoint }>
  close(): Promise<void>
}
