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

/** A signed statement that record `seq` had hash `hash` at `at`. */
export interface Checkpoint {
  readonly seq: number
  readonly hash: string
  readonly at: string
  readonly reason: CheckpointReason
  /** Which key signed (audit-key.ts `keyId`). */
  readonly keyId: string
  /** Ed25519 signature, base64url, over `checkpointPayload`. */
  readonly signature: string
}

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
  addCheckpoint(checkpoint: Checkpoint): Promise<void>
  /** Every checkpoint, by sequence number then time. */
  checkpoints(): Promise<Checkpoint[]>
  /**
   * Removes records up to `checkpoint.seq` and stores the checkpoint that vouches for the last
   * of them, in one transaction, so the remaining chain still starts from a signed hash.
   * Returns how many records were removed.
   */
  prune(checkpoint: Checkpoint): Promise<number>
  close(): Promise<void>
}
