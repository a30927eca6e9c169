/**
 * Turns a validated configuration into a gateway plan: a transport factory per upstream and the
 * catalog rules of each virtual server. Kept apart from gateway.ts so the gateway core can be
 * built and tested from plans without files or processes.
 */

import picomatch from 'picomatch'
import type { AuthRuntime } from '../auth/auth-runtime.ts'
import type { CatalogRules, ItemRules } from '../catalog/catalog.ts'
import { prefixUri } from '../catalog/names.ts'
import { compileUriFilter, tryJudged } from '../catalog/resource-uri.ts'
import { BarbicanError, toBarbicanError } from '../common/errors.ts'
import type {
  Config,
  ItemFilterConfig,
  UpstreamConfig,
  VirtualServerConfig,
} from '../config/config.ts'
import { securedTransportFactory } from '../credentials/upstream-setup.ts'
import { authorize } from '../policies/authorize.ts'
import { cedarPolicy } from '../policies/cedar.ts'
import { CedarEngine, readPolicyFiles, validatePolicies } from '../policies/cedar-engine.ts'
import { confirmPolicy } from '../policies/confirm.ts'
import { guards } from '../policies/guards.ts'
import type { Policy } from '../policies/policy.ts'
import { rateLimit } from '../policies/rate-limit.ts'
import { SecureContexts } from '../policies/secure-contexts.ts'
import { grantsForHints, RefusalHints } from '../sandbox/hints.ts'
import type { Launch, SandboxRefusalSink, SandboxSpec } from '../sandbox/sandbox.ts'
import { metaToolLimitsOf } from '../session/meta-tool-limits.ts'
import { tenantQualified } from '../store/tenant-pins.ts'
import { Hush, type Logger } from '../telemetry/log.ts'
import { createOutboundTransport, type OutboundSpec } from '../transports/connect-outbound.ts'
import type { HttpInboundOptions } from '../transports/http-inbound.ts'
import { installedLaunch } from '../trust/installed-launch.ts'
import { type Backends, NO_BACKENDS } from './backends.ts'
import type { GatewayPlan, ServerPlan, UpstreamPlan } from './gateway.ts'
import { PolicyState } from './policy-state.ts'
import { refusedTransport } from './trust-setup.ts'

/**
 * `auth` (src/auth/auth-runtime.ts), when given, stamps every upstream request with the caller's
 * context and applies each upstream's credentials. `backends` (backends.ts) holds what replicas
 * share; by default nothing is. `kept` is what the policies keep across reloads of one gateway
 * (policy-state.ts): a reload passes the one its gateway's first plan was built with.
 */
export function planFromConfig(
  config: Config,
  log: Logger,
  auth?: AuthRuntime,
  backends: Backends = NO_BACKENDS,
  tenant?: string,
  onSandboxRefusal?: SandboxRefusalSink,
  kept: PolicyState = new PolicyState(),
): GatewayPlan {
  return {
    upstreams: config.upstreams.map((u) =>
      upstreamPlan(u, config, log, auth, tenant, onSandboxRefusal, backends),
    ),
    policies: policiesFromConfig(config, backends, kept),
    servers: config.servers.map(serverPlan),
    clientRequestTimeoutMs: config.limits.requestTimeoutMs,
    listPageSize: config.limits.listPageSize,
    metaTools: metaToolLimitsOf(config.limits),
    heldCallTimeoutMs: config.limits.heldCallTimeoutMs,
    listTiming: {
      listDeadlineMs: config.limits.listDeadlineMs,
      handshakeWaitMs: config.limits.handshakeWaitMs,
      listRetryMs: config.limits.listRetryMs,
      listRetryMaxMs: config.limits.listRetryMaxMs,
    },
  }
}

/**
 * The policies the configuration asks for, and only those: a gateway without quotas or guards
 * has no such policy in its chain, so it pays nothing for them per call.
 */
function policiesFromConfig(config: Config, backends: Backends, kept: PolicyState): Policy[] {
  const policies: Policy[] = []
  if (config.rateLimits && config.rateLimits.length > 0) {
    policies.push(rateLimit(config.rateLimits, kept.rateCounters(backends)))
  }
  if (config.auth?.permissions) policies.push(authorize(config.auth.permissions))
  // One tracker of secure contexts: confirm enters labels into it, Cedar reads them.
  const tracker = config.contexts ? new SecureContexts(config.contexts, kept.heldLabels) : undefined
  if (config.cedar) {
    // Cedar's WebAssembly module loads here, only when Cedar policies are configured.
    const texts = readPolicyFiles(config.cedar.policies)
    // Fail closed: a policy the schema rejects could deny or allow other than it reads.
    const errors = validatePolicies(texts)
    if (errors.length > 0) {
      throw new BarbicanError('ERR_CONFIG_INVALID', `Cedar policies: ${errors.join('; ')}`)
    }
    policies.push(cedarPolicy(new CedarEngine(texts), config.cedar.mode, tracker))
  }
  if (config.confirm || config.contexts) {
    policies.push(
      confirmPolicy({
        rule: config.confirm,
        contexts: config.contexts,
        tracker,
        answerMs: config.limits.heldCallTimeoutMs,
        ledger: kept.answers(backends),
        sealer: kept.confirmSealer,
      }),
    )
  }
  if (config.guards) policies.push(guards(config.guards))
  return policies
}

function upstreamPlan(
  u: UpstreamConfig,
  config: Config,
  log: Logger,
  auth: AuthRuntime | undefined,
  tenant: string | undefined,
  onSandboxRefusal: SandboxRefusalSink | undefined,
  backends: Backends,
): UpstreamPlan {
  // The upstream turns the hush on while it keeps failing: its retries' lines go to debug.
  const hush = new Hush()
  const upstreamLog = hush.wrap(log.child({ part: 'upstream', upstream: u.name }))
  // A tenant's credentials and linked accounts are kept under its qualified name (ADR 060), so
  // another tenant's upstream of the same name never presents them.
  const keyed = tenant === undefined ? u : { ...u, name: tenantQualified(tenant, u.name) }
  return {
    name: u.name,
    requestTimeoutMs: u.requestTimeoutMs,
    lazy: u.transport === 'stdio' ? u.lazy : false,
    idleTimeoutMs: u.transport === 'stdio' ? u.idleTimeoutMs : 0,
    connectTimeoutMs: config.limits.upstreamConnectTimeoutMs,
    hush,
    maxCallOutputBytes: config.limits.upstreamMaxCallOutputBytes,
    ...(u.sessions === 'per-identity' ? { sessionScope: 'identity' as const } : {}),
    ...(u.transport === 'stdio' && u.sandbox !== 'none'
      ? { hints: hintsOf(u.name, u, u.sandbox) }
      : {}),
    createTransport: securedTransportFactory(keyed, auth, backends.redis, (filled) => {
      const spec = keyed === u ? filled : { ...filled, name: u.name }
      let launched: OutboundSpec
      try {
        launched = withInstalledPackage(u.name, spec)
      } catch (err) {
        const error = toBarbicanError(err)
        // A confined npx package that cannot run inside: the sandbox refused the launch.
        if (error.code === 'ERR_LAUNCH_REFUSED') {
          onSandboxRefusal?.({ upstream: u.name, kind: 'launch', reason: error.message })
        }
        return refusedTransport(error)
      }
      return createOutboundTransport(launched, {
        name: u.name,
        log: upstreamLog,
        limits: config.limits,
        requestTimeoutMs: u.requestTimeoutMs,
        stdio: { maxQueuedBytes: config.limits.upstreamMaxQueuedBytes, onSandboxRefusal },
      })
    }),
  }
}

/** The refusal hints of a confined entry: its grants are worked out at its first error. */
function hintsOf(name: string, launch: Launch, spec: SandboxSpec): RefusalHints {
  return new RefusalHints(name, () => grantsForHints(launch, spec))
}

/**
 * A confined `npx PACKAGE` runs the package installed outside the sandbox, which has no network
 * to install it (src/trust/installed-launch.ts); the launch check has verified that very package.
 */
function withInstalledPackage(name: string, spec: OutboundSpec): OutboundSpec {
  if (spec.transport !== 'stdio' || spec.sandbox === undefined || spec.sandbox === 'none') {
    return spec
  }
  const installed = installedLaunch(
    name,
    { command: spec.command, args: spec.args ?? [] },
    {
      cwd: spec.cwd ?? process.cwd(),
      home: spec.env?.HOME ?? process.env.HOME,
      packageCache: spec.sandbox.packageCache,
    },
  )
  return installed === undefined ? spec : { ...spec, ...installed }
}

function serverPlan(s: VirtualServerConfig): ServerPlan {
  const sep = s.namespacing.separator
  const rules: CatalogRules = {
    namespacing: s.namespacing,
    tools: itemRules(s.tools, sep, s.tools.rename, s.tools.descriptions),
    prompts: itemRules(s.prompts, sep, s.prompts.rename, {}),
    resources: resourceRules(s.resources),
    exposure: s.exposure,
  }
  return { name: s.name, upstreams: s.upstreams, rules }
}

/**
 * Globs and rename keys match an item by its upstream name or by its namespaced form
 * (`files__write_file`), so one rule can target every upstream or exactly one.
 */
function itemRules(
  filter: ItemFilterConfig,
  separator: string,
  rename: Readonly<Record<string, string>>,
  descriptions: Readonly<Record<string, string>>,
): ItemRules {
  const include = filter.include === undefined ? undefined : picomatch(filter.include as string[])
  const exclude = filter.exclude.length > 0 ? picomatch(filter.exclude as string[]) : undefined
  return {
    filter: (name, upstream) => {
      const namespaced = `${upstream}${separator}${name}`
      if (exclude && (exclude(name) || exclude(namespaced))) return false
      return include === undefined || include(name) || include(namespaced)
    },
    rename: (name, upstream) => rename[`${upstream}${separator}${name}`] ?? rename[name],
    description: (exposed) => descriptions[exposed],
  }
}

/**
 * Resource globs judge the normalised URI (or a template's stand-in, catalog/resource-uri.ts), by
 * the upstream's own URI or the namespaced one (`files+file:///…`); a URI without a normalised
 * form is never exposed.
 */
function resourceRules(filter: ItemFilterConfig): ItemRules {
  const admits = compileUriFilter(filter.include, filter.exclude)
  return {
    filter: (uri, upstream) => {
      const judged = tryJudged(uri)
      return judged !== undefined && admits([judged, prefixUri(upstream, judged)])
    },
    rename: () => undefined,
    description: () => undefined,
  }
}

/**
 * The HTTP listener's options from a configuration: where it listens, which hosts and origins it
 * answers, and its limits. Identity is the application's to add, from the auth runtime it builds.
 */
export function listenerPlan(config: Config): Partial<HttpInboundOptions> {
  return {
    host: config.listen.host,
    port: config.listen.port,
    allowedHosts: config.security.allowedHosts,
    allowedOrigins: config.security.allowedOrigins,
    maxBodyBytes: config.limits.maxBodyBytes,
    jsonLimits: config.limits,
    maxSessions: config.limits.maxSessions,
    maxSessionsPerIdentity: config.limits.maxSessionsPerIdentity,
    sessionIdleTimeoutMs: config.limits.sessionIdleTimeoutMs,
  }
}
