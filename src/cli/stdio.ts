/**
 * `barbican stdio`: one virtual server on stdin/stdout, for hosts that launch MCP servers as
 * processes. Logs go to stderr; stdout carries nothing but JSON-RPC.
 */

import type { AuditLog } from '../audit/audit-log.ts'
import { AuthRuntime } from '../auth/auth-runtime.ts'
import type { LoadedConfig } from '../config/config.ts'
import { openAuditLog, withAudit } from '../gateway/audit-setup.ts'
import { Gateway } from '../gateway/gateway.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { tenantView } from '../gateway/tenants.ts'
import { lockfilePathOf, openStore, withTrust } from '../gateway/trust-setup.ts'
import { SandboxRefusals } from '../sandbox/refusals.ts'
import { mechanismSettingError } from '../sandbox/sandbox.ts'
import type { Store } from '../store/store.ts'
import { tenantPins } from '../store/tenant-pins.ts'
import { startTracing, stopTracing } from '../telemetry/tracing.ts'
import type { ConnectionInfo } from '../transports/inbound.ts'
import { serveStdio } from '../transports/stdio-inbound.ts'
import { type CliIo, type CommandOptions, trustOptionsOf } from './command.ts'
import { loadForCommand } from './load.ts'
import { loggerFor } from './logging.ts'

export async function runStdio(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, true),
): Promise<number> {
  const loaded = await loading
  if (!loaded) return 1
  // A mechanism setting Barbican does not know stops it here, never runs a server with less.
  const badMechanism = mechanismSettingError()
  if (badMechanism !== undefined) {
    io.stderr(`barbican: ${badMechanism.message}\n`)
    return 1
  }
  const { config: whole } = loaded
  // The stdio identity's tenant, when tenants are configured, is the configuration served.
  const tenantName = whole.tenants === undefined ? undefined : whole.auth?.stdio?.tenant
  const tenant = whole.tenants?.find((t) => t.name === tenantName)
  if (tenantName !== undefined && tenant === undefined) {
    io.stderr(
      `barbican: auth.stdio.tenant names tenant "${tenantName}", which tenants: does not configure\n`,
    )
    return 1
  }
  const config = tenant === undefined ? whole : tenantView(whole, tenant)
  const server = options.server ?? config.servers[0]?.name ?? 'default'
  const log = loggerFor(config.log)
  for (const h of config.held ?? []) {
    log.warn('upstream held back', {
      upstream: h.name,
      reason: h.reason,
      next: 'set the variable and restart; the other upstreams run (--strict refuses instead)',
    })
  }
  try {
    await startTracing(process.env, log)
  } catch (error) {
    io.stderr(`barbican: ${(error as Error).message}\n`)
    return 1
  }
  const auth = config.auth ? new AuthRuntime(config.auth, log.child({ part: 'auth' })) : undefined
  let store: Store
  try {
    store = await openStore(config, loaded.source.path)
  } catch (err) {
    io.stderr(`barbican: cannot open the store: ${(err as Error).message}\n`)
    return 1
  }
  let audit: AuditLog | undefined
  try {
    audit = await openAuditLog(config, loaded.source.path, {
      log,
      running: true,
      stdoutFree: false,
    })
  } catch (err) {
    await store.close()
    io.stderr(`barbican: cannot open the audit log: ${(err as Error).message}\n`)
    return 1
  }
  if (auth && audit) auth.audit = audit
  const lockfilePath = lockfilePathOf(loaded.source.path)
  const pins = tenant === undefined ? store.pins : tenantPins(store.pins, tenant.name)
  const plan = withTrust(
    planFromConfig(
      config,
      log,
      auth,
      undefined,
      tenant?.name,
      new SandboxRefusals(log, audit).report,
    ),
    config,
    { store: { ...store, pins }, lockfilePath, audit, ...trustOptionsOf(options) },
    log,
  )
  const gateway = new Gateway(withAudit(plan, audit, config), log)
  if (!gateway.hasServer(server)) {
    io.stderr(`barbican: no virtual server named "${server}"\n`)
    await audit?.close()
    await store.close()
    return 1
  }
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
  void gateway.start()
  await new Promise<void>((resolve) => {
    const previous = transport.onclose
    transport.onclose = () => {
      previous?.()
      resolve()
    }
    process.once('SIGTERM', () => void transport.close())
    process.once('SIGINT', () => void transport.close())
  })
  await gateway.stop()
  await audit?.close()
  await store.close()
  await auth?.close()
  await stopTracing()
  return 0
}
