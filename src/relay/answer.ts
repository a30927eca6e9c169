/**
 * The relay: the step after the last policy. A merged list is answered with one page of the
 * caller's (narrowed) catalog; a call with one upstream goes there (unicast.ts, forward.ts,
 * translate.ts); what Barbican answers itself comes from `LOCAL`, one entry per local method.
 */
import { createHash } from 'node:crypto'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import { searchModeTools } from '../exposure/tool-search-mode.ts'
import type { Call, Reply } from '../policies/policy.ts'
import { isPlainObject } from '../protocol/jsonrpc.ts'
import type { LocalMethod } from '../protocol/methods.ts'
import type { Request, Result } from '../protocol/model.ts'
import { negotiateLegacy } from '../protocol/revisions.ts'
import type { Client } from '../session/client.ts'
import { LOG_LEVELS } from '../session/request-logs.ts'
import { stringParam } from '../virtual-servers/route.ts'
import { exposedCatalog } from './exposure-calls.ts'
import {
  complete,
  connectAll,
  discoverResult,
  initializeResult,
  listPage,
  ownTasks,
  setUpstreamLogLevel,
} from './local-answers.ts'
import { relayUnicast } from './unicast.ts'

/**
 * Answers `call` for the client that sent it (`call.sender`, set by calls.ts): the relay of the
 * gateway's one chain, which serves every client (ADR 135).
 */
export function answerSender(call: Call): Promise<Reply> {
  const client = call.sender
  if (client === undefined) {
    return Promise.reject(
      new BarbicanError('ERR_INTERNAL', `Call ${call.id} reached the relay without its client`),
    )
  }
  return answer(client as Client, call)
}

/** Answers `call` of `client`, after the policies let it through. */
export async function answer(client: Client, call: Call): Promise<Reply> {
  const { request, route, signal } = call
  const { method } = request
  const server = client.deps.server
  if (route.kind === 'unresolved') throw route.error

  if (route.kind === 'fanout') {
    const { exposure } = server
    const catalog =
      method === 'tools/list' && exposure.mode === 'search'
        ? await searchModeTools(route.catalog, exposure)
        : route.catalog
    for (const d of route.degraded) {
      client.notifications.log('warning', {
        message: `Upstream ${d.upstream} is unavailable: ${d.error}`,
      })
    }
    const cursor = request.params?.cursor
    return listPage(
      method === 'tools/list' ? exposedCatalog(server.exposure, catalog) : catalog,
      method,
      cursor,
      client.deps.listPageSize,
      route.degraded,
      viewKey(call.identity),
    )
  }

  if (route.kind === 'unicast') {
    const upstream = server.upstream(route.upstream)!
    const relayed = relayUnicast(client, upstream, route.original, request, signal)
    if (relayed !== undefined) {
      const reply = await relayed
      // A confined server's error that names a path or host outside its grants gets the fix.
      return upstream.hints ? upstream.hints.annotate(reply, call.log) : reply
    }
  }

  if (!Object.hasOwn(LOCAL, method)) {
    throw new BarbicanError('ERR_METHOD_UNKNOWN', `Method not found: ${method}`)
  }
  return await LOCAL[method as LocalMethod](client, request, signal)
}

/**
 * What Barbican answers itself, one entry per local method of the method table
 * (protocol/methods.ts `LocalMethod`: client requests that are neither a merged list nor
 * relayed); a new local method fails to compile until it has its answer here.
 */
const LOCAL: {
  readonly [M in LocalMethod]: (
    client: Client,
    request: Request,
    signal: AbortSignal,
  ) => Promise<Result>
} = {
  initialize: async (client, request) => {
    const params = request.params ?? {}
    const revision = negotiateLegacy(params.protocolVersion)
    client.negotiated(revision, isPlainObject(params.capabilities) ? params.capabilities : {})
    await connectAll(client.deps.server)
    return initializeResult(client.deps.server, revision, client.deps.serverInfo)
  },
  ping: async () => complete({}),
  'server/discover': async (client, request) => {
    await connectAll(client.deps.server)
    return discoverResult(client.deps.server, request.id, client.deps.serverInfo)
  },
  'tasks/list': (client, _request, signal) => ownTasks(client.deps.server, client.tasks, signal),
  'logging/setLevel': async (client, request, signal) => {
    const level = stringParam(request.params, 'level')
    if (!LOG_LEVELS.includes(level)) {
      throw new BarbicanError('ERR_INVALID_PARAMS', `Invalid log level: ${level}`)
    }
    client.notifications.setLogLevel(level)
    await setUpstreamLogLevel(client.deps.server, level, signal)
    return complete({})
  },
  'subscriptions/listen': (client, request, signal) => client.listenStreams.serve(request, signal),
}

/**
 * The key of the view a caller's lists are narrowed to (policies narrow by these facts): a
 * digest, so that cursors do not carry the identity in clear.
 */
function viewKey(identity: Identity): string {
  const facts = [
    identity.subject,
    identity.tenant,
    identity.client,
    identity.scopes,
    identity.claims,
  ]
  return createHash('sha256').update(JSON.stringify(facts)).digest('base64url').slice(0, 16)
}
