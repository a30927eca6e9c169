/**
 * What reaches one client without it asking: notifications on its behalf (progress, task
 * status, resource updates), log lines from Barbican and from upstreams filtered by the level
 * the client set, and list changes. What may be sent depends on the handshake: nothing unasked
 * before `notifications/initialized`, and on a stateless 2026-07-28 connection only what rides
 * a request's own response stream.
 */
import type { JsonObject, JsonRpcId, JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { Revision } from '../protocol/revisions.ts'
import { belowLevel } from './request-logs.ts'

/** How notifications leave: the session's transport and what the session negotiated. */
export interface NotificationChannel {
  /** The negotiated legacy revision; undefined before initialize and for 2026 clients. */
  revision(): Revision | undefined
  /** A stateless 2026 HTTP connection, where notifications only ride a request's stream. */
  readonly stateless: boolean
  send(message: JsonRpcMessage, relatedRequestId?: JsonRpcId): void
}

/** Catalog list key → the legacy notification announcing its change. */
function listChangedMethod(key: string): string {
  if (key === 'tools') return 'notifications/tools/list_changed'
  if (key === 'prompts') return 'notifications/prompts/list_changed'
  return 'notifications/resources/list_changed'
}

/**
 * One session's notifications to its client. It holds the two facts that gate them, which the
 * client sets: that it finished initializing, and the log level it asked for.
 */
export class ClientNotifications {
  #channel: NotificationChannel
  #initialized = false
  #logLevel: string | undefined

  constructor(channel: NotificationChannel) {
    this.#channel = channel
  }

  /** The client sent `notifications/initialized`: list changes and logs may flow now. */
  markInitialized(): void {
    this.#initialized = true
  }

  /** The level set with `logging/setLevel`, if any (also what legacy upstreams are told). */
  get logLevel(): string | undefined {
    return this.#logLevel
  }

  /** Records the client's `logging/setLevel`; lines below it are held back from now on. */
  setLogLevel(level: string): void {
    this.#logLevel = level
  }

  /** Sends a notification, on the stream of request `relatedRequestId` when given. */
  notify(method: string, params: JsonObject | undefined, relatedRequestId?: JsonRpcId): void {
    if (this.#channel.revision() === undefined && this.#channel.stateless) {
      // Stateless 2026 requests only carry notifications on their own response stream.
      if (relatedRequestId === undefined) return
    }
    const message: JsonRpcMessage =
      params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params }
    this.#channel.send(message, relatedRequestId)
  }

  /** A log line for the client (Barbican's own unless `logger` names an upstream). */
  log(level: string, data: unknown, logger = 'barbican'): void {
    const revision = this.#channel.revision()
    if (!this.#initialized && revision !== undefined) return
    if (this.#logLevel && belowLevel(level, this.#logLevel)) return
    if (revision === undefined) return
    this.notify('notifications/message', { level, logger, data })
  }

  /** A logging notification from an upstream, tagged with its source. */
  upstreamLog(upstream: string, params: JsonObject | undefined): void {
    const level = typeof params?.level === 'string' ? params.level : 'info'
    const logger = typeof params?.logger === 'string' ? `${upstream}/${params.logger}` : upstream
    this.log(level, params?.data, logger)
  }

  /** The virtual server's lists `keys` changed: one notification per distinct method. */
  listChanged(keys: readonly string[]): void {
    if (!this.#initialized) return
    const sent = new Set<string>()
    for (const key of keys) {
      const method = listChangedMethod(key)
      if (sent.has(method)) continue
      sent.add(method)
      this.notify(method, undefined)
    }
  }
}
