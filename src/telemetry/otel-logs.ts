/**
 * Audit records as OpenTelemetry logs (docs/audit.md "Export", ADR 047): on only when the
 * standard variables name a logs exporter or a logs endpoint; then `startLogExport` loads the
 * logs SDK (otel-logs-sdk.ts, a dynamic import, so a gateway without it never reads a line of
 * it). A general OTEL_EXPORTER_OTLP_ENDPOINT alone does not send audit records anywhere: they
 * name people and what they did, so their export is asked for by name.
 */
import type { Logger } from './log.ts'

import type { LogExport } from './otel-logs-sdk.ts'

export type { ExportedFields, LogExport } from './otel-logs-sdk.ts'

/**
 * Whether the environment asks for audit records as OTel logs: `OTEL_LOGS_EXPORTER=otlp`, or an
 * `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`; `OTEL_SDK_DISABLED=true` and `OTEL_LOGS_EXPORTER=none`
 * win.
 */
export function logExportRequested(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  const exporter = env.OTEL_LOGS_EXPORTER?.trim().toLowerCase()
  if (exporter === 'none') return false
  if (exporter !== undefined && exporter !== '') return true
  return Boolean(env.OTEL_EXPORTER_OTLP_LOGS_ENDPOINT?.trim())
}

/**
 * Starts the export when the environment asks for it; undefined otherwise. Throws a
 * BarbicanError (ERR_CONFIG_INVALID) for a setting it cannot honour, so a gateway never runs
 * without the export its operator asked for.
 */
export async function startLogExport(
  env: NodeJS.ProcessEnv,
  log: Logger,
): Promise<LogExport | undefined> {
  if (!logExportRequested(env)) return undefined
  const { createLogExport } = await import('./otel-logs-sdk.ts')
  return createLogExport(env, log)
}
