/**
 * A virtual server: the one MCP server a client sees at `/mcp/NAME`, composed of several
 * upstreams. It keeps the catalog (merged lists and the way back from every exposed name),
 * resolves each call to its upstream, and degrades when an upstream is down or slow: lists wait
 * for it at most the listing deadline, then leave it out and report it, and it is won back in
 * the background (virtual-servers/catalog-recovery.ts); calls to it fail fast.
 */
import { EventEmitter } from 'node:events'
import {
  buildCatalog,
  type Catalog,
  type CatalogRules,
  type Target,
  type UpstreamLists,
} from '../catalog/catalog.ts'
import { prefixUri, splitUri } from '../catalog/names.ts'
import { judgedUri } from '../catalog/resource-uri.ts'
import { BarbicanError } from '../common/errors.ts'
import { PLAIN_EXPOSURE, type ToolExposure } from '../config/config.ts'
import type { ServerText } from '../exposure/tool-search.ts'
import { printableName } from '../protocol/item-names.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { hasCapability } from '../protocol/methods.ts'
import type { Logger } from '../telemetry/log.ts'
import {
  quarantineCatalog,
  quarantineKey,
  withoutQuarantinedTemplates,
} from '../trust/quarantine.ts'
import type { Quarantine, TrustGuard } from '../trust/trust-guard.ts'
import type { ListKey, Upstream } from '../upstreams/upstream.ts'
import { ALL_LIST_KEYS } from '../upstreams/upstream-lists.ts'
import { CatalogRecovery, DEFAULT_LIST_TIMING, type ListTiming } from './catalog-recovery.ts'

/** An upstream a catalog left out, and why (late for the listing deadline, or failed). */
export interface Degraded {
  readonly upstream: string
  readonly error: string
}

/** A built catalog: the merged lists, the upstreams left out, and what trust quarantined. */
export interface CatalogView {
  readonly catalog: Catalog
  readonly degraded: Degraded[]
  /** Tools and prompts withheld by trust (docs/trust.md), by `quarantineKey`, with the reason. */
  readonly quarantined: ReadonlyMap<string, Quarantine>
}

/** What a VirtualServer emits; tsc checks every `emit` and `on` against it. */
export interface VirtualServerEvents {
  /** The merged lists may differ now (a member's changed, trust moved, a member was replaced). */
  listChanged: [keys: readonly ListKey[]]
}

export class VirtualServer extends EventEmitter<VirtualServerEvents> {
  readonly name: string
  /** Members in configuration order; replaced (never mutated) when one is removed. */
  upstreams: readonly Upstream[]
  #byName: Map<string, Upstream>
  #names: ReadonlySet<string>
  #rules: CatalogRules
  #catalog: Promise<CatalogView> | undefined
  /** What a kept `#catalog` settled to: `keptView` answers from it while it is still kept. */
  #settled: { readonly promise: Promise<CatalogView>; readonly view: CatalogView } | undefined
  #log: Logger
  #trust: TrustGuard | undefined
  /** The pin store's revision the current catalog was reviewed at. */
  #trustRevision = -1
  /**
   * Builds under way: until their review records the revision it read, the store's revision says
   * nothing about the catalog (their own writes move it, and lists gathered before the review
   * may take up to the listing deadline).
   */
  #reviewing = 0
  #listeners = new Map<Upstream, (keys: readonly ListKey[]) => void>()
  #stateListeners = new Map<Upstream, (state: string) => void>()
  readonly timing: ListTiming
  /** The members the catalog left out, retried in the background. */
  #recovery: CatalogRecovery

  constructor(
    name: string,
    upstreams: readonly Upstream[],
    rules: CatalogRules,
    log: Logger,
    trust?: TrustGuard,
    timing: ListTiming = DEFAULT_LIST_TIMING,
  ) {
    super()
    // Every client session of this server listens for list changes: thousands are normal.
    this.setMaxListeners(0)
    this.name = name
    this.upstreams = upstreams
    this.#byName = new Map(upstreams.map((u) => [u.name, u]))
    this.#names = new Set(this.#byName.keys())
    this.#rules = rules
    this.#log = log
    this.#trust = trust
    this.timing = timing
    this.#recovery = new CatalogRecovery(timing, {
      fetch: (member) => {
        const upstream = this.#byName.get(member)
        return upstream ? listsOf(upstream) : Promise.reject(new Error('removed'))
      },
      recovered: (member) => {
        this.#log.info('upstream back in the catalog', { server: this.name, upstream: member })
        this.#catalog = undefined
        this.emit('listChanged', [...ALL_LIST_KEYS])
      },
    })
    for (const upstream of upstreams) this.#watch(upstream)
  }

  /** Follows a member's list changes, and its coming back when the catalog left it out. */
  #watch(upstream: Upstream): void {
    const listener = (keys: readonly ListKey[]) => {
      this.#catalog = undefined
      this.emit('listChanged', keys)
    }
    const onState = (state: string) => {
      if (state === 'ready') this.#recovery.retryNow(upstream.name)
    }
    this.#listeners.set(upstream, listener)
    this.#stateListeners.set(upstream, onState)
    upstream.on('listChanged', listener)
    upstream.on('state', onState)
  }

  #unwatch(upstream: Upstream): void {
    const listener = this.#listeners.get(upstream)
    if (listener) upstream.off('listChanged', listener)
    const onState = this.#stateListeners.get(upstream)
    if (onState) upstream.off('state', onState)
    this.#listeners.delete(upstream)
    this.#stateListeners.delete(upstream)
    this.#recovery.forget(upstream.name)
  }

  /** Ends background retries (the gateway is stopping). */
  stop(): void {
    this.#recovery.stop()
  }

  /**
   * Takes an upstream out of this server at once: open sessions no longer list its items at
   * their next request and their calls to it are refused as unknown.
   */
  removeUpstream(name: string): boolean {
    const upstream = this.#byName.get(name)
    if (!upstream) return false
    this.#unwatch(upstream)
    this.upstreams = this.upstreams.filter((u) => u !== upstream)
    this.#byName.delete(name)
    this.#names = new Set(this.#byName.keys())
    this.#catalog = undefined
    this.emit('listChanged', [...ALL_LIST_KEYS])
    return true
  }

  /**
   * Takes a reloaded configuration's members and rules (src/gateway/reload.ts): members no
   * longer named leave at once, new ones join, the filters and renames apply to the next
   * catalog, and sessions are told their lists changed.
   */
  reconfigure(upstreams: readonly Upstream[], rules: CatalogRules): void {
    const next = new Set(upstreams)
    for (const old of this.upstreams) if (!next.has(old)) this.#unwatch(old)
    for (const fresh of upstreams) if (!this.#listeners.has(fresh)) this.#watch(fresh)
    this.upstreams = upstreams
    this.#byName = new Map(upstreams.map((u) => [u.name, u]))
    this.#names = new Set(this.#byName.keys())
    this.#rules = rules
    this.#catalog = undefined
    this.emit('listChanged', [...ALL_LIST_KEYS])
  }

  /**
   * Tells the sessions their lists changed when only what callers may see of them did (the
   * policies were swapped): the catalog itself stays as it is.
   */
  viewsChanged(): void {
    this.emit('listChanged', [...ALL_LIST_KEYS])
  }

  upstream(name: string): Upstream | undefined {
    return this.#byName.get(name)
  }

  /**
   * What search knows of the server a tool comes from: the upstream's name and the title and
   * description it gave in `serverInfo` (not its instructions: usage notes, not a summary).
   */
  serverText(upstream: string): ServerText {
    const info = this.#byName.get(upstream)?.info?.serverInfo
    const parts = ['name', 'title', 'description'].map((k) => info?.[k])
    return { name: upstream, text: parts.filter((p) => typeof p === 'string').join(' ') }
  }

  /** How clients are offered the catalog: as is, as one `run_code` tool, tools-only. */
  get exposure(): ToolExposure {
    return this.#rules.exposure ?? PLAIN_EXPOSURE
  }

  /**
   * The URI a client names an upstream's resource by (what `resources/read` on this server
   * routes back to it): its listed exposed URI, else the namespaced form when names are
   * prefixed, else the URI itself. Resource links in tool results are rewritten with it.
   */
  async exposedUri(upstream: string, uri: string): Promise<string> {
    const { catalog } = await this.catalog()
    for (const [exposed, target] of catalog.resourceTargets) {
      if (target.upstream === upstream && target.original === uri) return exposed
    }
    return this.#rules.namespacing.mode === 'never' ? uri : prefixUri(upstream, uri)
  }

  /**
   * Puts a new Upstream in place of the member of the same name (its configuration changed):
   * the catalog is rebuilt from it at the next request and sessions are told lists changed.
   */
  replaceUpstream(upstream: Upstream): boolean {
    const old = this.#byName.get(upstream.name)
    if (!old) return false
    this.#unwatch(old)
    this.#watch(upstream)
    this.upstreams = this.upstreams.map((u) => (u === old ? upstream : u))
    this.#byName.set(upstream.name, upstream)
    this.#catalog = undefined
    this.emit('listChanged', [...ALL_LIST_KEYS])
    return true
  }

  /**
   * Notices an operator's decision, possibly made by another process: when the pin store moved
   * since the catalog was reviewed, the catalog is rebuilt at the next request and clients are
   * told their lists changed, so an approved item comes back without waiting for them to ask.
   * `fresh`: read the store's revision now (a decision was announced), not a recent read.
   */
  async refreshTrust(fresh = false): Promise<void> {
    if (!this.#trust || !this.#catalog || this.#reviewing > 0) return
    if ((await this.#trust.revision(fresh)) === this.#trustRevision) return
    this.#catalog = undefined
    this.emit('listChanged', ['tools', 'prompts', 'resourceTemplates'])
  }

  /**
   * The merged catalog, within the listing deadline: upstreams not listed by then, or whose
   * lists failed, are left out and reported, and won back in the background. A degraded catalog
   * is kept like any other: a list never waits for a member the catalog already left out.
   */
  catalog(): Promise<CatalogView> {
    // The common case, decided without I/O: the revision read recently still matches (a call
    // then costs no store read; trust/trust-guard.ts bounds how old that read may be). Not an
    // async function: every call resolves its route here, and the kept promise is the answer.
    const trust = this.#trust
    if (trust && this.#catalog && trust.cachedRevision() !== this.#trustRevision) {
      return this.#refreshedCatalog()
    }
    return this.#keptCatalog()
  }

  async #refreshedCatalog(): Promise<CatalogView> {
    await this.refreshTrust()
    return await this.#keptCatalog()
  }

  /** The catalog kept, or one being built now when there is none. */
  #keptCatalog(): Promise<CatalogView> {
    if (!this.#catalog) {
      const building = this.#build()
      this.#catalog = building
      building.then(
        (view) => {
          this.#settled = { promise: building, view }
        },
        () => {
          if (this.#catalog === building) this.#catalog = undefined
        },
      )
    }
    return this.#catalog
  }

  /**
   * What `catalog()` would give now, when that is known without waiting: the kept catalog is
   * built and the pin store's recent revision still matches it. Undefined: ask `catalog()`.
   * Every tool call is routed here, and a promise costs it several turns of the microtask queue.
   */
  keptView(): CatalogView | undefined {
    const kept = this.#catalog
    const settled = this.#settled
    // The same promise: a catalog dropped or rebuilt since is not answered from.
    if (kept === undefined || settled?.promise !== kept) return undefined
    const trust = this.#trust
    if (trust && trust.cachedRevision() !== this.#trustRevision) return undefined
    return settled.view
  }

  /** Every member's lists, or, for the members missing or late for the deadline, none. */
  async #gather(degraded: Degraded[]): Promise<UpstreamLists[]> {
    const deadlineMs = this.timing.listDeadlineMs
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), deadlineMs)
    })
    try {
      return await Promise.all(
        this.upstreams.map(async (u): Promise<UpstreamLists> => {
          const missing = this.#recovery.missing(u.name)
          if (missing !== undefined) {
            degraded.push({ upstream: u.name, error: missing })
            return emptyLists(u.name)
          }
          const fetching = listsOf(u)
          const outcome = await Promise.race([fetching, deadline]).catch((err: Error) => err)
          if (outcome === 'late') {
            const error = `Upstream "${u.name}" did not list within the listing deadline (${deadlineMs} ms; ${u.state})`
            degraded.push({ upstream: u.name, error })
            this.#recovery.late(u.name, error, fetching)
            return emptyLists(u.name)
          }
          if (outcome instanceof Error) {
            degraded.push({ upstream: u.name, error: outcome.message })
            this.#recovery.failed(u.name, outcome.message)
            return emptyLists(u.name)
          }
          return outcome
        }),
      )
    } finally {
      clearTimeout(timer)
    }
  }

  async #build(): Promise<CatalogView> {
    this.#reviewing++
    try {
      return await this.#reviewed()
    } finally {
      this.#reviewing--
    }
  }

  async #reviewed(): Promise<CatalogView> {
    const degraded: Degraded[] = []
    const lists = await this.#gather(degraded)
    if (!this.#trust) {
      const catalog = buildCatalog(lists, this.#rules)
      this.#logConflicts(catalog)
      return { catalog, degraded, quarantined: new Map() }
    }
    const listed = lists.filter((l) => !degraded.some((d) => d.upstream === l.name))
    const verdict = await this.#trust.review(
      listed.map((l) => {
        const info = this.#byName.get(l.name)?.info
        return {
          upstream: l.name,
          lists: { ...l, instructions: info?.instructions, serverInfo: info?.serverInfo },
        }
      }),
    )
    // Read exactly (not from the cache): the review just read the pins this revision names.
    this.#trustRevision = await this.#trust.revision(true)
    const built = buildCatalog(withoutQuarantinedTemplates(lists, verdict), this.#rules)
    this.#logConflicts(built)
    return { ...quarantineCatalog(built, verdict), degraded }
  }

  #logConflicts(catalog: Catalog): void {
    for (const conflict of catalog.conflicts) {
      this.#log.warn('name conflict in virtual server', { server: this.name, ...conflict })
    }
    for (const held of catalog.heldBack) {
      this.#log.warn('name held back from clients', {
        server: this.name,
        upstream: held.upstream,
        kind: held.kind,
        name: printableName(held.original),
        exposed: printableName(held.exposed),
        reason: held.reason,
      })
    }
  }

  /** Also returns the catalog it was resolved in, where policies find the tool's definition. */
  async resolveTool(
    name: string,
  ): Promise<{ upstream: Upstream; target: Target; catalog: Catalog }> {
    return this.resolveToolIn(await this.catalog(), name)
  }

  /** `resolveTool` in `view`, a catalog at hand (`keptView`, `catalog()`). */
  resolveToolIn(
    view: CatalogView,
    name: string,
  ): { upstream: Upstream; target: Target; catalog: Catalog } {
    refuseQuarantined(view, 'tool', name)
    return { ...this.#resolve(view.catalog.toolTargets, name, 'tool'), catalog: view.catalog }
  }

  async resolvePrompt(name: string): Promise<{ upstream: Upstream; target: Target }> {
    const view = await this.catalog()
    refuseQuarantined(view, 'prompt', name)
    return this.#resolve(view.catalog.promptTargets, name, 'prompt')
  }

  /**
   * The form a client's resource URI is judged, looked up and forwarded in: normalised
   * (catalog/resource-uri.ts), its namespace prefix kept. ERR_INVALID_PARAMS when it has none.
   */
  judgeUri(uri: string): string {
    return judgedUri(uri)
  }

  /**
   * Resources may be read by URIs never listed (templates), so an unlisted URI is routed by its
   * namespace prefix, or to the only upstream offering resources. A URI is resolved in its
   * judged form, which is what the upstream receives; a `template` (a completion reference
   * names one) is routed by its text and judged by its stand-in (catalog/resource-uri.ts).
   */
  async resolveResource(
    uri: string,
    kind: 'resource' | 'template' = 'resource',
  ): Promise<{ upstream: Upstream; target: Target }> {
    const { catalog } = await this.catalog()
    const exposed = kind === 'resource' ? this.judgeUri(uri) : uri
    const listed = kind === 'resource' ? catalog.resourceTargets.get(exposed) : undefined
    if (listed) return { upstream: this.#byName.get(listed.upstream)!, target: listed }
    const split = splitUri(exposed, this.#names)
    if (split && this.#rules.namespacing.mode !== 'never') {
      if (!this.#rules.resources.filter(split.uri, split.upstream)) throw unknown('resource', uri)
      return {
        upstream: this.#byName.get(split.upstream)!,
        target: { upstream: split.upstream, original: split.uri },
      }
    }
    const offering = this.upstreams.filter((u) =>
      hasCapability(u.info?.capabilities, ['resources']),
    )
    const upstream = offering[0]
    if (offering.length === 1 && upstream && this.#rules.resources.filter(exposed, upstream.name)) {
      return { upstream, target: { upstream: upstream.name, original: exposed } }
    }
    throw unknown('resource', uri)
  }

  #resolve(targets: ReadonlyMap<string, Target>, name: string, kind: string) {
    const target = targets.get(name)
    if (!target) throw unknown(kind, name)
    return { upstream: this.#byName.get(target.upstream)!, target }
  }

  /** Capabilities of the virtual server: the union of what its upstreams advertise. */
  capabilities(): JsonObject {
    const caps: JsonObject = {}
    const infos = this.upstreams.map((u) => u.info?.capabilities)
    const any = (...path: string[]) => infos.some((c) => hasCapability(c, path))
    // Barbican itself supports change notifications for every list it merges.
    caps.tools = { listChanged: true }
    caps.prompts = { listChanged: true }
    caps.resources = { subscribe: any('resources', 'subscribe'), listChanged: true }
    if (any('completions')) caps.completions = {}
    caps.logging = {}
    // Tasks (2025-11-25) pass through to upstreams that support them; advertise what any does.
    if (any('tasks')) {
      const tasks: JsonObject = {}
      if (any('tasks', 'list')) tasks.list = {}
      if (any('tasks', 'cancel')) tasks.cancel = {}
      if (any('tasks', 'requests', 'tools', 'call')) tasks.requests = { tools: { call: {} } }
      caps.tasks = tasks
    }
    return caps
  }

  /** Which upstream offers what: the attribution behind the merged capabilities. */
  attribution(): JsonObject[] {
    return this.upstreams.map((u) => {
      const info = u.info
      if (!info) return { name: u.name, state: u.state }
      return {
        name: u.name,
        state: u.state,
        serverInfo: info.serverInfo,
        protocolVersion: info.protocolVersion,
        capabilities: info.capabilities,
      }
    })
  }

  /** Instructions of every upstream that gave some, each attributed to its upstream. */
  instructions(): string | undefined {
    const trust = this.#trust
    const parts = this.upstreams
      .filter((u) => {
        const text = u.info?.instructions
        return text && (!trust || trust.allowsInstructions(u.name, text))
      })
      .map((u) => `[${u.name}] ${u.info!.instructions}`)
    return parts.length > 0 ? parts.join('\n\n') : undefined
  }

  /** Upstreams that are usable now (for logging/setLevel and roots fan-out). */
  connectedUpstreams(): Upstream[] {
    return this.upstreams.filter((u) => u.state === 'ready')
  }
}

/** All four lists of `upstream` (connecting first if needed), from its cache when it has them. */
async function listsOf(upstream: Upstream): Promise<UpstreamLists> {
  const [tools, prompts, resources, resourceTemplates] = await Promise.all([
    upstream.list('tools'),
    upstream.list('prompts'),
    upstream.list('resources'),
    upstream.list('resourceTemplates'),
  ])
  return { name: upstream.name, tools, prompts, resources, resourceTemplates }
}

function emptyLists(name: string): UpstreamLists {
  return { name, tools: [], prompts: [], resources: [], resourceTemplates: [] }
}

function refuseQuarantined(view: CatalogView, kind: 'tool' | 'prompt', name: string): void {
  const q = view.quarantined.get(quarantineKey(kind, name))
  if (!q) return
  throw new BarbicanError('ERR_TOOL_QUARANTINED', `${name} is quarantined: ${q.message}`, {
    data: { upstream: q.upstream, key: q.key, reason: q.reason, changes: q.changes },
  })
}

function unknown(kind: string, name: string): BarbicanError {
  return new BarbicanError('ERR_ROUTE_UNKNOWN', `Unknown ${kind}: ${name}`, {
    data: { [kind]: name },
  })
}
