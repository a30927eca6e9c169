/**
 * What `serve` and `stdio` open the same way before their gateways exist: tracing, the pin store
 * and the audit log. Each part pushes how to close it onto the application's stack, so a start
 * that fails later unwinds what it opened, and a stop closes it after the gateways drained.
 */
import type { AuditLog } from '../audit/audit-log.ts'
import type { Config, LoadedConfig } from '../config/config.ts'
import { openAuditLog } from '../gateway/audit-setup.ts'
import { openStore } from '../gateway/trust-setup.ts'
import type { Store } from '../store/store.ts'
import type { Logger } from '../telemetry/log.ts'
import { startTracing, stopTracing } from '../telemetry/tracing.ts'
import type { Disposers } from './disposers.ts'

/**
 * A start that cannot go on: its message is one line for the operator (the CLI prints it after
 * `barbican: `). What was opened before it is closed by then.
 */
export class StartError extends Error {
  override readonly name = 'StartError'
}

/** Runs `open`; on failure, the stack unwinds and a StartError says `what` failed and why. */
export async function opening<T>(
  stack: Disposers,
  what: string | undefined,
  open: () => Promise<T>,
): Promise<T> {
  try {
    return await open()
  } catch (err) {
    await stack.dispose()
    const why = (err as Error).message
    throw new StartError(what === undefined ? why : `${what}: ${why}`, { cause: err })
  }
}

export interface Parts {
  readonly store: Store
  readonly audit: AuditLog | undefined
}

/**
 * Tracing (closed last, so that the spans of drained requests are exported), the store and the
 * audit log (closed after the drain: its shutdown checkpoint covers the last call's record).
 * `stdoutFree`: false for `stdio`, whose stdout carries JSON-RPC.
 */
export async function openParts(
  stack: Disposers,
  loaded: LoadedConfig,
  log: Logger,
  stdoutFree: boolean,
): Promise<Parts> {
  const { config, source } = loaded
  const tracing = await opening(stack, undefined, () => startTracing(process.env, log))
  if (tracing && stdoutFree) log.info('tracing on: spans exported over OTLP')
  stack.push('tracing', () => stopTracing())
  const store = await opening(stack, 'cannot open the store', () => openStore(config, source.path))
  stack.push('store', () => store.close())
  const audit = await opening(stack, 'cannot open the audit log', () =>
    openAuditLog(config, source.path, { log, running: true, stdoutFree }),
  )
  if (audit) stack.push('audit', () => audit.close())
  return { store, audit }
}

/** An upstream held back by a variable that is not set (ADR 121): one warning each. */
export function warnHeld(config: Config, log: Logger): void {
  for (const h of config.held ?? []) {
    log.warn('upstream held back', {
      upstream: h.name,
      reason: h.reason,
      next: 'set the variable and restart; the other upstreams run (--strict refuses instead)',
    })
  }
}
