/**
 * A virtual server: the one MCP server a client sees at `/mcp/NAME`, composed of several
 * upstreams. It keeps the catalog (merged lists and the way back from every exposed name),
 * resolves each call to its upstream, and degrades when an upstream is down: lists leave the
 * missing upstream out and report it; calls to it fail fast.
 */
import { EventEmitter } from 'node:events'
import { BarbicanError } from '../errors.ts'
import type { Logger } from '../log.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { hasCapability } from '../protocol/methods.ts'
import type { ListKey, Upstream } from '../upstreams/upstream.ts'
import {
  buildCatalog,
  type Catalog,
  type CatalogRules,
  type Target,
  type UpstreamLists,
} from './catalog.ts'
import { splitUri } from './names.ts'

export interface Degraded {
  readonly upstream: string
  readonly error: string
}

export class VirtualServer extends EventEmitter {
  readonly name: string
  readonly upstreams: readonly Upstream[]
  #byName: Map<string, Upstream>
  #names: ReadonlySet<string>
  #rules: CatalogRules
  #catalog: Promise<{ catalog: Catalog; degraded: Degraded[] }> | undefined
  #log: Logger

  constructor(name: string, upstreams: readonly Upstream[], rules: CatalogRules, log: Logger) {
    super()
    this.name = name
    this.upstreams = upstreams
    this.#byName = new Map(upstreams.map((u) => [u.name, u]))
    this.#names = new Set(this.#byName.keys())
    this.#rules = rules
    this.#log = log
    for (const upstream of upstreams) {
      upstream.on('listChanged', (keys: ListKey[]) => {
        this.#catalog = undefined
        this.emit('listChanged', keys)
      })
    }
  }

  upstream(name: string): Upstream | undefined {
    return this.#byName.get(name)
  }

  /** The merged catalog; upstreams that cannot be listed are left out and reported. */
  async catalog(): Promise<{ catalog: Catalog; degraded: Degraded[] }> {
    if (!this.#catalog) {
      const building = this.#build()
      this.#catalog = building
      // A degraded catalog is not kept: the next list tries the missing upstream again.
      building.then(
        (c) => {
          if (c.degraded.length > 0 && this.#catalog === building) this.#catalog = undefined
        },
        () => {
          if (this.#catalog === building) this.#catalog = undefined
        },
      )
    }
    return await this.#catalog
  }

  async #build(): Promise<{ catalog: Catalog; degraded: Degraded[] }> {
    const degraded: Degraded[] = []
    const lists = await Promise.all(
      this.upstreams.map(async (u): Promise<UpstreamLists> => {
        try {
          const [tools, prompts, resources, resourceTemplates] = await Promise.all([
            u.list('tools'),
            u.list('prompts'),
            u.list('resources'),
            u.list('resourceTemplates'),
          ])
          return { name: u.name, tools, prompts, resources, resourceTemplates }
        } catch (err) {
          degraded.push({ upstream: u.name, error: (err as Error).message })
          return { name: u.name, tools: [], prompts: [], resources: [], resourceTemplates: [] }
        }
      }),
    )
    const catalog = buildCatalog(lists, this.#rules)
    for (const conflict of catalog.conflicts) {
      this.#log.warn('name conflict in virtual server', { server: this.name, ...conflict })
    }
    return { catalog, degraded }
  }

  async resolveTool(name: string): Promise<{ upstream: Upstream; target: Target }> {
    return this.#resolve((await this.catalog()).catalog.toolTargets, name, 'tool')
  }

  async resolvePrompt(name: string): Promise<{ upstream: Upstream; target: Target }> {
    return this.#resolve((await this.catalog()).catalog.promptTargets, name, 'prompt')
  }

  /**
   * Resources may be read by URIs never listed (templates), so an unlisted URI is routed by its
   * namespace prefix, or to the only upstream offering resources.
   */
  async resolveResource(uri: string): Promise<{ upstream: Upstream; target: Target }> {
    const { catalog } = await this.catalog()
    const listed = catalog.resourceTargets.get(uri)
    if (listed) return { upstream: this.#byName.get(listed.upstream)!, target: listed }
    const split = splitUri(uri, this.#names)
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
    if (offering.length === 1 && upstream && this.#rules.resources.filter(uri, upstream.name)) {
      return { upstream, target: { upstream: upstream.name, original: uri } }
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
    const parts = this.upstreams
      .filter((u) => u.info?.instructions)
      .map((u) => `[${u.name}] ${u.info!.instructions}`)
    return parts.length > 0 ? parts.join('\n\n') : undefined
  }

  /** Upstreams that are usable now (for logging/setLevel and roots fan-out). */
  connectedUpstreams(): Upstream[] {
    return this.upstreams.filter((u) => u.state === 'ready')
  }
}

function unknown(kind: string, name: string): BarbicanError {
  return new BarbicanError('ERR_ROUTE_UNKNOWN', `Unknown ${kind}: ${name}`, {
    data: { [kind]: name },
  })
}
