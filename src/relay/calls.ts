/**
 * The `Call` of an exchange, as the policies judge it (policies/policy.ts), and the caller's
 * view of the catalog: a `tools/list` run through the same chain, ending in the catalog instead
 * of a page (what `search_tools` searches and what a program may call).
 */
import type { Catalog } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import type { ProgramClock } from '../exposure/code-clock.ts'
import { compose } from '../policies/chain.ts'
import type { Call } from '../policies/policy.ts'
import type { ErrorReply, Request } from '../protocol/model.ts'
import { LOCAL_ROUTE, type Route, resolveRoute } from '../virtual-servers/route.ts'
import type { Exchange } from './exchange-types.ts'
import { complete } from './local-answers.ts'

/** The call of exchange `x` (of `request`, by default its own), its route still to resolve. */
export function callOf(
  x: Exchange,
  clock?: ProgramClock,
  request: Request = x.request,
): Call & { route: Route } {
  const { client } = x
  return {
    id: client.nextCallId(),
    request,
    identity: client.identity,
    server: client.info.server,
    transport: client.info.kind,
    route: LOCAL_ROUTE,
    signal: x.signal,
    log: x.log,
    decisions: [],
    // Plain data, no getter: an accessor in a literal is defined at run time and turns every
    // call into a dictionary-mode object (~5,000 instructions per call, bench/NOTEBOOK.md).
    // The peer itself is built only when a policy reads it (client.ts `LazyPeer`).
    peer: client.lazyPeer(x.modern, request, clock),
    catalog: client.catalogOfServer,
    sender: client,
  }
}

/**
 * The catalog as `request` (a tools/list) shows it to the caller of `x`: run through the same
 * policy chain as a listing (audited, limited and narrowed like one), ending here instead of
 * paging.
 */
export async function viewOf(x: Exchange, request: Request): Promise<Catalog | ErrorReply> {
  const { client } = x
  const call = callOf(x, undefined, request)
  call.route = await resolveRoute(client.deps.server, request, client.tasks)
  let view: Catalog | undefined
  const generation = client.deps.policies.current
  const chain = compose(generation.policies, async (seen) => {
    if (seen.route.kind === 'unresolved') throw seen.route.error
    if (seen.route.kind === 'fanout') view = seen.route.catalog
    return complete({})
  })
  const reply = await generation.run(() => chain(call))
  if (reply.kind === 'error') return reply
  if (view === undefined) throw new BarbicanError('ERR_INTERNAL', 'tools/list has no catalog')
  return view
}
