/**
 * The application `barbican stdio` runs (ADR 118): one virtual server on stdin/stdout, built by
 * the same assembly as `serve` (parts.ts, gateways.ts) and closed by the same stack of clean-up
 * steps. Logs go to stderr; stdout carries nothing but JSON-RPC.
 */
import type { Config, LoadedConfig } from '../config/config.ts'
import { NO_BACKENDS } from '../gateway/backends.ts'
import { Gateway } from '../gateway/gateway.ts'
import { tenantView } from '../gateway/tenants.ts'
import { lockfilePathOf, type TrustSetup } from '../gateway/trust-setup.ts'
import { SandboxRefusals } from '../sandbox/refusals.ts'
import type { Logger } from '../telemetry/log.ts'
import type { ConnectionInfo } from '../transports/inbound.ts'
import { serveStdio } from '../transports/stdio-inbound.ts'
import { Disposers } from './disposers.ts'
import { authRuntimeOf, gatewayPlan } from './gateways.ts'
import { openParts, StartError, warnHeld } from './parts.ts'

export interface StdioAppOptions {
  /** The logger for the configuration served (the tenant's, when the stdio identity has one). */
  readonly logFor: (config: Config) => Logger
  /** What the CLI adds to trust (suggested commands, `--allow-floating`). */
  readonly trust: Omit<TrustSetup, 'store'>
  /** The virtual server to serve; default: the first configured. */
  readonly server?: string | undefined
}

export interface StdioApp {
  /** Settles when the host closes stdin (or `stop` closes the transport). */
  readonly closed: Promise<void>
  /** Closes the transport, then the gateway and everything opened for it. */
  stop(): Promise<void>
}

/**
 * The configuration `stdio` serves: with tenants, the view of the stdio identity's tenant
 * (`auth.stdio.tenant`), which must be configured.
 */
function servedConfig(whole: Config): { config: Config; tenant: string | undefined } {
  const tenantName = whole.tenants === undefined ? undefined : whole.auth?.stdio?.tenant
  const tenant = whole.tenants?.find((t) => t.name === tenantName)
  if (tenantName !== undefined && tenant === undefined) {
    throw new StartError(
      `auth.stdio.tenant names tenant "${tenantName}", which tenants: does not configure`,
    )
  }
  return tenant === undefined
    ? { config: whole, tenant: undefined }
    : { config: tenantView(whole, tenant), tenant: tenant.name }
}

/** Starts `stdio`. Throws a StartError, after closing what it opened, when it cannot. */
export async function startStdioApp(
  loaded: LoadedConfig,
  options: StdioAppOptions,
): Promise<StdioApp> {
  const { config, tenant } = servedConfig(loaded.config)
  const server = options.server ?? config.servers[0]?.name ?? 'default'
  const log = options.logFor(config)
  warnHeld(config, log)
  const stack = new Disposers()
  const { store, audit } = await openParts(stack, { ...loaded, config }, log, false)
  const auth = authRuntimeOf(config, log, audit)
  if (auth) stack.push('auth', () => auth.close())
  const trust = { store, lockfilePath: lockfilePathOf(loaded.source.path), ...options.trust }
  const refusals = new SandboxRefusals(log, audit)
  const plan = gatewayPlan(
    { log, auth, trust, audit, backends: NO_BACKENDS, refusals },
    config,
    tenant,
  )
  const gateway = new Gateway(plan, log)
  if (!gateway.hasServer(server)) {
    await stack.dispose()
    throw new StartError(`no virtual server named "${server}"`)
  }
  stack.push('gateway', () => gateway.stop())
  // stdio has no tokens: the host that launched Barbican vouches for the configured identity.
  const identity = auth?.stdioIdentity()
  const handler = identity
    ? {
        hasServer: (name: string) => gateway.hasServer(name),
        connect: (t: Parameters<typeof gateway.connect>[0], info: ConnectionInfo) =>
          gateway.connect(t, { ...info, identity }),
      }
    : gateway
  const transport = serveStdio(handler, { server, jsonLimits: config.limits })
  let open = true
  const closed = new Promise<void>((resolve) => {
    const previous = transport.onclose
    transport.onclose = () => {
      open = false
      previous?.()
      resolve()
    }
  })
  void gateway.start()
  return {
    closed,
    async stop() {
      if (open) await transport.close()
      await closed
      await stack.dispose((name, error) => log.error(`stopping the ${name} failed`, { error }))
    },
  }
}
