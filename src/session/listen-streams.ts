/**
 * The 2026-07-28 `subscriptions/listen` streams one client has open. A listen request stays open
 * for as long as the client wants notifications: Barbican acknowledges the subset of the filter
 * it honours, then feeds the stream with the virtual server's list changes and with updates of
 * the resources it watches upstream, each tagged with the listen request's id.
 */
import type { JsonObject, JsonRpcId } from '../protocol/jsonrpc.ts'
import { isPlainObject } from '../protocol/jsonrpc.ts'
import { hasCapability } from '../protocol/methods.ts'
import { META, type Request, type Result } from '../protocol/model.ts'
import type { WatchTarget } from '../virtual-servers/route.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'

/** What the streams need from their session: the server and the way to notify the client. */
export interface ListenHost {
  readonly server: VirtualServer
  /** Sends a notification to the client, on the stream of request `relatedRequestId`. */
  notify(method: string, params: JsonObject | undefined, relatedRequestId: JsonRpcId): void
}

/** One open listen stream: what it watches, and updates held back until its acknowledgement. */
interface ListenStream {
  readonly watched: Map<string, WatchTarget>
  queue: JsonObject[] | undefined
}

/** Catalog list key → the 2026 listen filter flag that asks for its changes. */
const LISTEN_FLAGS: Readonly<Record<string, string>> = {
  tools: 'toolsListChanged',
  prompts: 'promptsListChanged',
  resources: 'resourcesListChanged',
  resourceTemplates: 'resourcesListChanged',
}

/**
 * A session's open listen streams. Kept apart from the session because a stream's life (ack
 * first, queueing updates that race it, unsubscribing upstream on close) is its own protocol.
 */
export class ListenStreams {
  #host: ListenHost
  /** Open streams: listen request id → watched URIs (exposed → upstream target). */
  #streams = new Map<JsonRpcId, ListenStream>()

  constructor(host: ListenHost) {
    this.#host = host
  }

  /**
   * Serves one listen request until `signal` aborts (the client closed it): acknowledged first,
   * then fed by list changes and watched-resource updates; answered with its subscription id.
   */
  async serve(request: Request, signal: AbortSignal): Promise<Result> {
    const id = request.id
    const { server } = this.#host
    const notify = (method: string, params: JsonObject) => this.#host.notify(method, params, id)
    const asked = isPlainObject(request.params?.notifications) ? request.params.notifications : {}
    const honoured: JsonObject = {}
    for (const key of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) {
      if (asked[key] === true) honoured[key] = true
    }
    const watched = new Map<string, WatchTarget>()
    // Registered before subscribing upstream: an update racing the subscription is queued
    // until the acknowledgement, which must come first on the stream.
    const stream: ListenStream = { watched, queue: [] }
    this.#streams.set(id, stream)
    const uris = Array.isArray(asked.resourceSubscriptions) ? asked.resourceSubscriptions : []
    for (const uri of uris) {
      if (typeof uri !== 'string') continue
      try {
        const { upstream, target } = await server.resolveResource(uri)
        if (!hasCapability(upstream.info?.capabilities, ['resources', 'subscribe'])) continue
        watched.set(uri, { upstream: upstream.name, uri: target.original })
        if (upstream.era === 'modern') upstream.watchResource(target.original, true)
        else await upstream.request('resources/subscribe', { uri: target.original }, { signal })
      } catch {
        // A URI Barbican cannot watch is left out of the acknowledgement.
        watched.delete(uri)
      }
    }
    if (watched.size > 0) honoured.resourceSubscriptions = [...watched.keys()]
    const tag = (params: JsonObject = {}): JsonObject => ({
      ...params,
      _meta: { [META.subscriptionId]: id },
    })
    notify('notifications/subscriptions/acknowledged', tag({ notifications: honoured }))
    const onList = (keys: readonly string[]) => {
      const sent = new Set<string>()
      for (const key of keys) {
        const flag = LISTEN_FLAGS[key]
        if (flag === undefined || honoured[flag] !== true || sent.has(flag)) continue
        sent.add(flag)
        notify(
          `notifications/${key === 'resourceTemplates' ? 'resources' : key}/list_changed`,
          tag(),
        )
      }
    }
    server.on('listChanged', onList)
    for (const params of stream.queue ?? []) {
      notify('notifications/resources/updated', params)
    }
    stream.queue = undefined
    try {
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve()
        else signal.addEventListener('abort', () => resolve(), { once: true })
      })
    } finally {
      server.off('listChanged', onList)
      this.#streams.delete(id)
      for (const target of watched.values()) {
        const upstream = server.upstream(target.upstream)
        if (upstream?.era === 'modern') upstream.watchResource(target.uri, false)
        else upstream?.request('resources/unsubscribe', { uri: target.uri }).catch(() => {})
      }
    }
    return {
      kind: 'result',
      id,
      resultType: 'complete',
      result: { _meta: { [META.subscriptionId]: id } },
    }
  }

  /** An upstream's resources/updated, delivered (or queued) on every stream watching that URI. */
  resourceUpdated(upstream: string, uri: unknown): void {
    for (const [id, stream] of this.#streams) {
      for (const [exposed, target] of stream.watched) {
        if (target.upstream === upstream && target.uri === uri) {
          const tagged = { uri: exposed, _meta: { [META.subscriptionId]: id } }
          if (stream.queue) stream.queue.push(tagged)
          else this.#host.notify('notifications/resources/updated', tagged, id)
        }
      }
    }
  }
}
