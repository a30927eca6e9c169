/**
 * The steps of one exchange between decode and encode, in order (`runSteps`). The checks come
 * first, a fixed table (`CHECKS`): each reads the exchange and either answers it (the steps
 * after it do not run) or passes it on.
 *
 * 1. `judgeUris`: resource URIs in the one normalised form policies judge and upstreams receive.
 * 2. `unwrapMetaTool`: search mode's `call_tool` becomes the direct call it names.
 * 3. `checkMethod`: the method exists in the client's revision; a 2026 envelope updates the
 *    client's capabilities.
 * 4. `answerSearch`: `search_tools`, from the caller's view of the catalog.
 * 5. `runExposureTool`: `run_code` and the tools-only adapters, whose every step is an exchange
 *    of its own (exposure-run.ts).
 * 6. The route (`routeOf`, virtual-servers/route.ts), on a `Call` the policies judge (calls.ts).
 * 7. `checkParamHeaders`: a 2026 `tools/call`'s `Mcp-Param-*` headers agree with its arguments.
 * 8. The policy chain, counted, around the relay (answer.ts); a tool's result adapted.
 */
import { withJudgedUris } from '../catalog/resource-uri.ts'
import type { SearchArguments } from '../exposure/tool-search-mode.ts'
import { deniedBy } from '../policies/chain.ts'
import type { Call, Next } from '../policies/policy.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import { DEFAULT_HTTP_LEGACY_REVISION, type Revision } from '../protocol/revisions.ts'
import { DENIED, outcomeOfError, outcomeOfReply, type ServerMetrics } from '../telemetry/metrics.ts'
import { type Route, resolveRoute } from '../virtual-servers/route.ts'
import { callOf, viewOf } from './calls.ts'
import type { Exchange } from './exchange-types.ts'
import { adaptToolResult, isExposureTool } from './exposure-calls.ts'
import { exposureToolRun } from './exposure-run.ts'
import { assertMethodAllowed, paramHeaderReply } from './request-checks.ts'
import { metaToolCall, searchTools, viewRequest } from './tool-search-calls.ts'

type Reply = Result | ErrorReply

/** One step: a reply ends the exchange there; undefined passes it to the next step. */
type Step = (x: Exchange) => Reply | undefined | Promise<Reply | undefined>

/** Resource URIs in one normalised form, for policies and upstreams alike. */
const judgeUris: Step = (x) => {
  const server = x.client.deps.server
  x.request = withJudgedUris(x.request, (uri) => server.judgeUri(uri))
  return undefined
}

/**
 * Search mode: `call_tool` is the direct call it names from here on (a `call_tool` naming no
 * callable tool keeps its error for the route, so audit records the refused call);
 * `search_tools` is answered by `answerSearch`.
 */
const unwrapMetaTool: Step = (x) => {
  const { client } = x
  x.meta = metaToolCall(client.deps.server, x.request, client.metaTools.limits.maxResults)
  if (x.meta.kind === 'call') x.request = x.meta.request
  return undefined
}

/** The method exists in the client's revision; a 2026 request's envelope is its declaration. */
const checkMethod: Step = (x) => {
  const { request, modern, client } = x
  const revision: Revision = modern
    ? (request.envelope?.protocolVersion as Revision)
    : (client.revision ?? DEFAULT_HTTP_LEGACY_REVISION)
  assertMethodAllowed(request, modern, revision)
  if (modern && request.envelope) client.clientCapabilities = request.envelope.clientCapabilities
  return undefined
}

/** `search_tools`: the best tools for the query among those the caller may see. */
const answerSearch: Step = (x) => (x.meta.kind === 'search' ? searched(x, x.meta.args) : undefined)

async function searched(x: Exchange, args: SearchArguments): Promise<Reply> {
  const { client } = x
  const gate = client.metaTools
  await gate.admit(client.info.server, client.identity, 'search_tools')
  const view = await viewOf(x, viewRequest(x.request))
  if (!('tools' in view)) return view
  return await searchTools(client.deps.server, args, view, gate.limits)
}

/** The tools the exposure adds (run_code, the adapters): each runs its steps as exchanges. */
const runExposureTool: Step = (x) => {
  const { request, client } = x
  if (request.method !== 'tools/call') return undefined
  if (!isExposureTool(client.deps.server.exposure, request.params?.name)) return undefined
  const run = exposureToolRun(x, runSteps)
  // The call itself is audited too (a program's digest, or its text with rawArguments),
  // besides each call it makes; the other policies judge those calls, not this one.
  const generation = client.deps.policies.current
  const audit = generation.audit
  if (audit === undefined) return run()
  const call = callOf(x)
  return generation.run(() => audit.handle(call, run))
}

/**
 * Where the call goes, resolved before the chain so every policy sees the same answer: the
 * call the policies judge. A `call_tool` naming no callable tool is refused by the relay, after
 * audit saw it.
 */
function routeOf(x: Exchange): Route | Promise<Route> {
  const { meta, client } = x
  if (meta.kind === 'call' && meta.error) return { kind: 'unresolved', error: meta.error }
  return resolveRoute(client.deps.server, x.request, client.tasks)
}

/**
 * A 2026 `tools/call`'s `Mcp-Param-*` headers agree with its arguments. A `call_tool`'s headers
 * follow call_tool's own schema, which declares no Mcp-Param header.
 */
function checkParamHeaders(x: Exchange, route: Route): Promise<ErrorReply | undefined> | undefined {
  const { headers, request } = x
  if (!x.modern || headers === undefined || x.meta.kind !== 'none') return undefined
  if (request.method !== 'tools/call' || route.kind !== 'unicast') return undefined
  return paramHeaderReply(x.client.deps.server, request, headers)
}

/** The checks before the route, in order: a fixed table, which an exchange walks for free. */
const CHECKS: readonly Step[] = [
  judgeUris,
  unwrapMetaTool,
  checkMethod,
  answerSearch,
  runExposureTool,
]

/**
 * Runs the steps of `x` in order: the checks (the first that answers ends the exchange), the
 * route, the `Mcp-Param-*` check, then the policy chain around the relay (answer.ts); a tool's
 * result adapted for the exposure. The route and the chain are awaited here rather than in steps
 * of their own: each async step would cost every call a promise and a turn of the microtask
 * queue (bench/hot-path.ts).
 */
export async function runSteps(x: Exchange): Promise<Reply> {
  // Indexed: a for-of over the table cost an array iterator call per check (bench/NOTEBOOK.md).
  for (let i = 0; i < CHECKS.length; i++) {
    const pending = CHECKS[i]!(x)
    const reply = pending instanceof Promise ? await pending : pending
    if (reply !== undefined) return reply
  }
  const { client } = x
  const call = callOf(x, x.clock)
  const routed = routeOf(x)
  const route = routed instanceof Promise ? await routed : routed
  call.route = route
  if (route.kind === 'unicast') x.facts.upstream = route.upstream
  x.call = call
  const mismatch = checkParamHeaders(x, route)
  if (mismatch !== undefined) {
    const refusal = await mismatch
    if (refusal !== undefined) return refusal
  }
  // The chain's run (live-policies.ts `LiveChain.run`) inlined: the call is counted in the
  // generation it took, without a closure and an async function of its own.
  const generation = client.chain.current
  const chain = client.chain.composedFor(generation)
  const metrics = client.deps.metrics
  let reply: Reply
  generation.enter()
  try {
    reply = metrics === undefined ? await chain(call) : await counted(call, chain, metrics)
  } finally {
    generation.leave()
  }
  if (call.request.method === 'tools/call' && route.kind === 'unicast') {
    const adapted = adaptToolResult(client.deps.server, route.upstream, reply)
    return adapted instanceof Promise ? await adapted : adapted
  }
  return reply
}

/** The chain, with the call counted and timed by virtual server, upstream, tool and outcome. */
async function counted(call: Call, chain: Next, metrics: ServerMetrics): Promise<Reply> {
  const { route, request } = call
  const upstream = route.kind === 'unicast' ? route.upstream : ''
  // Only a name the catalog routed is a label: made-up names must not use up `maxTools`.
  const tool =
    request.method === 'tools/call' && upstream !== '' ? (request.params?.name as string) : ''
  const started = metrics.begin()
  try {
    const reply = await chain(call)
    metrics.end(request.method, upstream, tool, outcomeOfReply(reply), started)
    return reply
  } catch (err) {
    const outcome = outcomeOfError(err)
    metrics.end(request.method, upstream, tool, outcome, started)
    if (outcome === DENIED) metrics.denied(deniedBy(err) ?? 'unknown')
    throw err
  }
}
