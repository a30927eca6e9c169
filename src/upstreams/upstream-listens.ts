/**
 * The `subscriptions/listen` streams Barbican itself keeps open toward a 2026-07-28 upstream.
 * That era has no unsolicited notifications and no `resources/subscribe`: list changes and
 * resource updates arrive only on a listen stream, so Barbican opens one for list changes per
 * connection and one naming every resource its legacy clients subscribed to.
 */
import { modernHeaders, type UpstreamEnvelope, withEnvelope } from '../bridge/envelope.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { hasCapability } from '../protocol/methods.ts'
import type { RequestOptions, UpstreamClient } from './upstream-client.ts'

/** A listen stream lasts as long as its connection: the longest timeout a timer accepts. */
const FOREVER_MS = 2 ** 31 - 1

/** Opens a listen stream on `client` with `notifications` as its filter; it never resolves. */
function listen(
  client: UpstreamClient,
  notifications: JsonObject,
  envelope: UpstreamEnvelope,
  signal?: AbortSignal,
): void {
  const params = withEnvelope({ notifications }, envelope)
  client
    .request('subscriptions/listen', params, {
      ...(signal ? { signal } : {}),
      timeoutMs: FOREVER_MS,
      send: { headers: modernHeaders('subscriptions/listen', params) } as RequestOptions['send'],
    })
    .catch(() => {})
}

/**
 * Opens a listen stream for the list changes the upstream advertises, so a modern upstream's
 * list changes reach Barbican like a legacy server's notifications; it lives as long as the
 * connection. Nothing is opened when the upstream advertises no `listChanged`.
 */
export function listenForListChanges(
  client: UpstreamClient,
  capabilities: JsonObject,
  envelope: UpstreamEnvelope,
): void {
  const notifications: JsonObject = {}
  if (hasCapability(capabilities, ['tools', 'listChanged'])) notifications.toolsListChanged = true
  if (hasCapability(capabilities, ['prompts', 'listChanged'])) {
    notifications.promptsListChanged = true
  }
  if (hasCapability(capabilities, ['resources', 'listChanged'])) {
    notifications.resourcesListChanged = true
  }
  if (Object.keys(notifications).length === 0) return
  listen(client, notifications, envelope)
}

/**
 * Legacy clients' resource subscriptions toward one 2026-07-28 upstream: URI → subscriber
 * count, watched through one listen stream. A listen filter cannot be edited, so the stream is
 * reopened whenever the set changes (an update landing in that gap is lost) and on reconnect.
 */
export class ResourceWatches {
  #counts = new Map<string, number>()
  #stream: AbortController | undefined
  #envelope: UpstreamEnvelope

  /** `envelope` is Barbican's own: the stream serves every subscribed client at once. */
  constructor(envelope: UpstreamEnvelope) {
    this.#envelope = envelope
  }

  /** How many URIs are watched. */
  get size(): number {
    return this.#counts.size
  }

  /** One more (`watch`) or one fewer subscriber of `uri`. */
  count(uri: string, watch: boolean): void {
    const count = (this.#counts.get(uri) ?? 0) + (watch ? 1 : -1)
    if (count > 0) this.#counts.set(uri, count)
    else this.#counts.delete(uri)
  }

  /** Closes the current stream and opens one on `client` naming every watched URI, if any. */
  reopen(client: UpstreamClient | undefined): void {
    this.#stream?.abort()
    this.#stream = undefined
    if (!client || client.closed || this.#counts.size === 0) return
    const controller = new AbortController()
    this.#stream = controller
    listen(
      client,
      { resourceSubscriptions: [...this.#counts.keys()] },
      this.#envelope,
      controller.signal,
    )
  }
}
