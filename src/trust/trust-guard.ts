/**
 * Checks what upstreams advertise against their pins and the scan, and decides which items are
 * quarantined: hidden from lists and refused on call, while everything else of the server keeps
 * working. New definitions are pinned (trust on first use) or held for approval; changed ones
 * are recorded as pending changes with their findings, for `barbican pins`.
 */
import type { AuditSink } from '../audit/audit-log.ts'
import type { PendingChange, PinAction, PinnedItem, PinStore } from '../store/store.ts'
import type { Logger } from '../telemetry/log.ts'
import { canonicalHash } from './canonical.ts'
import { type CommandHint, plainHint } from './command-hint.ts'
import { diffDefinitions, type FieldChange, summarizeChanges } from './diff.ts'
import { type Finding, QUARANTINE_SEVERITIES } from './findings.ts'
import { DEFAULT_TRUST_POLICY, FIRST_SIGHT, type TrustPolicy } from './policy.ts'
import { scanItem, scanSurfaces } from './scan.ts'
import { type AdvertisedLists, itemKey, type SurfaceItem, surfaceOf } from './surface.ts'

/** Why an item is hidden. */
export interface Quarantine {
  readonly upstream: string
  readonly key: string
  readonly kind: SurfaceItem['kind']
  readonly name: string
  readonly reason: 'changed' | 'new' | 'scan' | 'rejected'
  /** A sentence naming the change, for error messages and logs. */
  readonly message: string
  readonly changes: readonly FieldChange[]
}

/** The outcome of one review: quarantined keys per upstream, and every scan finding. */
export interface TrustVerdict {
  readonly quarantined: ReadonlyMap<string, ReadonlyMap<string, Quarantine>>
  /** Per upstream, the items let through although they differ from their approval (warn). */
  readonly changed: ReadonlyMap<string, ReadonlySet<string>>
  readonly findings: readonly Finding[]
}

export interface TrustGuardOptions {
  readonly store: PinStore
  /** The policy of an upstream; upstreams not named get the defaults. */
  readonly policies?: ReadonlyMap<string, TrustPolicy>
  readonly log: Logger
  readonly now?: () => Date
  /**
   * How old the store's revision may be before it is read again (default
   * REVISION_MAX_AGE_MS). Writes through this process's own store object are seen at once
   * whatever this says; it bounds how late a decision made by another process (`barbican pins
   * approve`) reaches calls. 0 reads the store on every call.
   */
  readonly revisionMaxAgeMs?: number
  /** Where the guard's own decisions (trusted on first sight, quarantined) are recorded. */
  readonly audit?: AuditSink | undefined
  /** How suggested commands are spelt (default: without options). */
  readonly hint?: CommandHint
}

/**
 * The longest a decision made by another process waits before calls see it (ADR 013): the
 * catalog asks for the revision on every call, and reading it from SQLite each time (a read and
 * two file locks) was the largest Barbican-specific cost per call.
 */
export const REVISION_MAX_AGE_MS = 250

export class TrustGuard {
  readonly store: PinStore
  #policies: ReadonlyMap<string, TrustPolicy>
  #log: Logger
  #now: () => Date
  /** Approved hashes by upstream and key, as last read from the store. */
  #approved = new Map<string, Map<string, PinnedItem>>()
  /** One review at a time, so two virtual servers never pin the same first sight twice. */
  #queue: Promise<unknown> = Promise.resolve()
  /** Warnings already logged (upstream, key, hash, rule), so a rebuild does not repeat them. */
  #warned = new Set<string>()
  readonly #revisionMaxAgeMs: number
  readonly #hint: CommandHint
  /** The store's revision as last read, when (performance.now()), and its local write count then. */
  #revision = 0
  #revisionAt = Number.NEGATIVE_INFINITY
  #revisionWrites = -1
  /** What the latest review of each upstream hides (for metrics). */
  #hidden = new Map<string, ReadonlyMap<string, Quarantine>>()

  readonly #audit: AuditSink | undefined

  constructor(options: TrustGuardOptions) {
    this.store = options.store
    this.#policies = options.policies ?? new Map()
    this.#log = options.log
    this.#now = options.now ?? (() => new Date())
    this.#revisionMaxAgeMs = options.revisionMaxAgeMs ?? REVISION_MAX_AGE_MS
    this.#audit = options.audit
    this.#hint = options.hint ?? plainHint
  }

  policy(upstream: string): TrustPolicy {
    return this.#policies.get(upstream) ?? DEFAULT_TRUST_POLICY
  }

  /** Takes each upstream's policy from a reloaded configuration (src/gateway/reload.ts). */
  setPolicies(policies: ReadonlyMap<string, TrustPolicy>): void {
    this.#policies = policies
  }

  /** Reads the approved pins into memory (for the synchronous instructions check). */
  async load(): Promise<void> {
    const all = await this.store.pinned()
    this.#approved.clear()
    for (const p of all) this.#approvedOf(p.upstream).set(p.key, p)
  }

  /**
   * The store's revision as last read, without I/O, while that read is fresh: younger than the
   * maximum age and no write through this process's store object since. Undefined otherwise
   * (then `revision()` reads it).
   */
  cachedRevision(): number | undefined {
    if (this.store.localWrites() !== this.#revisionWrites) return undefined
    if (performance.now() - this.#revisionAt >= this.#revisionMaxAgeMs) return undefined
    return this.#revision
  }

  /**
   * The store's revision: a virtual server rebuilds its catalog when it moved. Read from the
   * store when the last read is no longer fresh (`cachedRevision`), or always with `fresh`.
   */
  async revision(fresh = false): Promise<number> {
    if (!fresh) {
      const cached = this.cachedRevision()
      if (cached !== undefined) return cached
    }
    // Counted before the read: a write landing while it runs makes the next call read again.
    const writes = this.store.localWrites()
    const at = performance.now()
    const revision = await this.store.revision()
    this.#revision = revision
    this.#revisionAt = at
    this.#revisionWrites = writes
    return revision
  }

  /**
   * Whether an upstream's instructions may reach clients now, decided from the pins in memory:
   * the approved text, or a first sight under `trust` without severe findings.
   */
  allowsInstructions(upstream: string, text: string): boolean {
    const policy = this.policy(upstream)
    const key = itemKey('instructions', '')
    const approved = this.#approvedOf(upstream).get(key)
    const hash = canonicalHash(text)
    const item: SurfaceItem = { kind: 'instructions', name: '', key, definition: text, hash }
    const severe =
      policy.scan === 'quarantine' &&
      scanItem(upstream, item).some((f) => QUARANTINE_SEVERITIES.has(f.severity))
    if (approved?.hash === hash) return !(severe && approved.approvedBy === FIRST_SIGHT)
    if (approved) return policy.onChange === 'warn' && !severe
    return policy.firstSight === 'trust' && !severe
  }

  /** Reviews the surfaces of a virtual server's upstreams (lists fetched together). */
  review(
    upstreams: readonly { readonly upstream: string; readonly lists: AdvertisedLists }[],
  ): Promise<TrustVerdict> {
    const run = this.#queue.then(() => this.#review(upstreams))
    this.#queue = run.catch(() => {})
    return run
  }

  async #review(
    upstreams: readonly { readonly upstream: string; readonly lists: AdvertisedLists }[],
  ): Promise<TrustVerdict> {
    const surfaces = upstreams.map((u) => ({ upstream: u.upstream, items: surfaceOf(u.lists) }))
    const findings = scanSurfaces(surfaces)
    const quarantined = new Map<string, Map<string, Quarantine>>()
    const changed = new Map<string, Set<string>>()
    for (const { upstream, items } of surfaces) {
      const pinned = new Map((await this.store.pinned(upstream)).map((p) => [p.key, p]))
      const pending = new Map((await this.store.pending(upstream)).map((p) => [p.key, p]))
      this.#approved.set(upstream, pinned)
      const hidden = new Map<string, Quarantine>()
      for (const item of items) {
        const own = findings.filter((f) => f.upstream === upstream && f.key === item.key)
        const q = await this.#decide(
          upstream,
          item,
          own,
          pinned.get(item.key),
          pending.get(item.key),
        )
        if (q) hidden.set(item.key, q)
        else if (q === null)
          changed.set(upstream, (changed.get(upstream) ?? new Set()).add(item.key))
      }
      if (hidden.size > 0) quarantined.set(upstream, hidden)
      this.#hidden.set(upstream, hidden)
    }
    return { quarantined, changed, findings }
  }

  /** Every item hidden by the latest review of its upstream. */
  *quarantined(): Iterable<Quarantine> {
    for (const hidden of this.#hidden.values()) yield* hidden.values()
  }

  async #decide(
    upstream: string,
    item: SurfaceItem,
    findings: readonly Finding[],
    approved: PinnedItem | undefined,
    pending: PendingChange | undefined,
  ): Promise<Quarantine | null | undefined> {
    const policy = this.policy(upstream)
    const severe =
      policy.scan === 'quarantine' && findings.some((f) => QUARANTINE_SEVERITIES.has(f.severity))
    const what = `${item.kind === 'resourceTemplate' ? 'resource template' : item.kind}${item.name ? ` "${item.name}"` : ''} of upstream "${upstream}"`
    const review = `review it with: ${this.#hint(`pins diff ${upstream} ${item.key}`)}`
    const flagged = () =>
      `${what} is quarantined by the scan (${findings
        .filter((f) => QUARANTINE_SEVERITIES.has(f.severity))
        .map((f) => `${f.rule}: ${f.message}`)
        .join('; ')}); ${review}`
    this.#warnFindings(upstream, item, findings, severe)

    if (approved?.hash === item.hash) {
      if (pending && pending.hash !== item.hash) await this.store.dismiss(upstream, item.key)
      if (!(severe && approved.approvedBy === FIRST_SIGHT)) return undefined
      await this.#propose(item, upstream, pending, approved.hash, 'scan', findings, 'flagged')
      return this.#hide(upstream, item, 'scan', flagged(), [])
    }
    if (pending?.hash === item.hash && pending.status === 'rejected') {
      const changes = diffDefinitions(approved?.definition, item.definition)
      return this.#hide(
        upstream,
        item,
        'rejected',
        `${what} was rejected by ${pending.decidedBy ?? 'an operator'}; it stays hidden while the server advertises it`,
        changes,
      )
    }
    if (approved) {
      const changes = diffDefinitions(approved.definition, item.definition)
      await this.#propose(item, upstream, pending, approved.hash, 'changed', findings, 'changed')
      const message = `${what} changed since it was approved (${summarizeChanges(changes)}); ${review}`
      if (policy.onChange === 'quarantine' || severe)
        return this.#hide(upstream, item, 'changed', message, changes)
      this.#warnOnce(
        `${upstream}\u0000${item.key}\u0000${item.hash}\u0000change`,
        message,
        upstream,
      )
      // Let through, but not as approved: null tells the review (policies read it as `changed`).
      return null
    }
    if (policy.firstSight === 'approve' || severe) {
      const reason = severe ? 'scan' : 'new'
      await this.#propose(
        item,
        upstream,
        pending,
        null,
        reason,
        findings,
        severe ? 'flagged' : 'new',
      )
      const message = severe ? flagged() : `${what} is new and waits for approval; ${review}`
      return this.#hide(
        upstream,
        item,
        reason,
        message,
        diffDefinitions(undefined, item.definition),
      )
    }
    const at = this.#now().toISOString()
    const pin: PinnedItem = { upstream, ...fields(item), approvedAt: at, approvedBy: FIRST_SIGHT }
    await this.store.pin(pin)
    this.#approvedOf(upstream).set(item.key, pin)
    if (pending) await this.store.dismiss(upstream, item.key)
    await this.#event(upstream, item, 'trusted', null, FIRST_SIGHT)
    return undefined
  }

  async #propose(
    item: SurfaceItem,
    upstream: string,
    pending: PendingChange | undefined,
    previousHash: string | null,
    reason: PendingChange['reason'],
    findings: readonly Finding[],
    action: PinAction,
  ): Promise<void> {
    if (pending?.hash === item.hash && pending.reason === reason) return
    await this.store.propose({
      upstream,
      ...fields(item),
      previousHash,
      reason,
      findings,
      status: 'pending',
      seenAt: this.#now().toISOString(),
    })
    await this.#event(upstream, item, action, previousHash, 'barbican')
  }

  async #event(
    upstream: string,
    item: SurfaceItem,
    action: PinAction,
    previousHash: string | null,
    actor: string,
  ): Promise<void> {
    await this.store.record({
      upstream,
      key: item.key,
      action,
      hash: item.hash,
      previousHash,
      actor,
      at: this.#now().toISOString(),
    })
    try {
      await this.#audit?.record({
        type: 'admin',
        action: `pin.${action}`,
        actor,
        upstream,
        target: item.key,
        outcome: 'ok',
        detail: item.hash,
      })
    } catch (error) {
      // The decision stands (quarantine fails closed on its own); the missing record is loud.
      this.#log.error('trust decision not recorded in the audit log', { upstream, error })
    }
  }

  #hide(
    upstream: string,
    item: SurfaceItem,
    reason: Quarantine['reason'],
    message: string,
    changes: readonly FieldChange[],
  ): Quarantine {
    this.#warnOnce(`${upstream}\u0000${item.key}\u0000${item.hash}\u0000hide`, message, upstream)
    return { upstream, key: item.key, kind: item.kind, name: item.name, reason, message, changes }
  }

  #warnFindings(
    upstream: string,
    item: SurfaceItem,
    findings: readonly Finding[],
    severe: boolean,
  ): void {
    if (severe) return
    for (const f of findings) {
      const id = `${upstream}\u0000${item.key}\u0000${item.hash}\u0000${f.rule}\u0000${f.message}`
      this.#warnOnce(
        id,
        `scan: ${f.kind} "${f.name}" ${f.rule} (${f.severity}): ${f.message}`,
        upstream,
      )
    }
  }

  #warnOnce(id: string, message: string, upstream: string): void {
    if (this.#warned.has(id)) return
    this.#warned.add(id)
    this.#log.warn(message, { upstream })
  }

  #approvedOf(upstream: string): Map<string, PinnedItem> {
    let map = this.#approved.get(upstream)
    if (!map) {
      map = new Map()
      this.#approved.set(upstream, map)
    }
    return map
  }
}

function fields(item: SurfaceItem) {
  return {
    key: item.key,
    kind: item.kind,
    name: item.name,
    hash: item.hash,
    definition: item.definition,
  }
}
