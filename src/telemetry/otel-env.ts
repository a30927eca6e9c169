/**
 * The standard `OTEL_*` variables that traces and logs read alike: the exporter, the OTLP/HTTP
 * protocol and endpoint of one signal, and the batch processor's sizes. One reading, so both
 * signals accept and refuse the same values with the same words.
 */
import { BarbicanError } from '../common/errors.ts'

export function otelInvalid(message: string): BarbicanError {
  return new BarbicanError('ERR_CONFIG_INVALID', message)
}

/** A variable's trimmed value; unset and blank read alike. */
export function otelSetting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim()
  return value === undefined || value === '' ? undefined : value
}

/** Where and how one signal is exported over OTLP/HTTP (gRPC is not shipped). */
export interface OtlpTarget {
  readonly protocol: 'http/protobuf' | 'http/json'
  /** The exporter's options: the URL when one is set, else the exporter's default. */
  readonly config: { url?: string }
}

/**
 * `OTEL_<SIGNAL>_EXPORTER` must be `otlp`; the signal's own protocol and endpoint win over the
 * general ones, and the general endpoint gets the signal's path (`/v1/traces`, `/v1/logs`).
 */
export function otlpTarget(env: NodeJS.ProcessEnv, signal: 'TRACES' | 'LOGS'): OtlpTarget {
  const exporterVar = `OTEL_${signal}_EXPORTER`
  const exporter = otelSetting(env, exporterVar)?.toLowerCase() ?? 'otlp'
  if (exporter !== 'otlp') {
    throw otelInvalid(`${exporterVar}=${exporter} is not supported: use otlp or none`)
  }
  const protocol =
    otelSetting(env, `OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`) ??
    otelSetting(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf'
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw otelInvalid(
      `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf or http/json`,
    )
  }
  const own = otelSetting(env, `OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`)
  const base = otelSetting(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  const path = `/v1/${signal.toLowerCase()}`
  const url = own ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}${path}`)
  return { protocol, config: url === undefined ? {} : { url } }
}

/** A batch processor's sizes from `<prefix>_*` (OTEL_BSP for spans, OTEL_BLRP for logs). */
export function otelBatchOptions(
  env: NodeJS.ProcessEnv,
  prefix: 'OTEL_BSP' | 'OTEL_BLRP',
): {
  scheduledDelayMillis?: number
  maxQueueSize?: number
  maxExportBatchSize?: number
  exportTimeoutMillis?: number
} {
  const options: Record<string, number> = {}
  const read = (variable: string, option: string) => {
    const raw = otelSetting(env, variable)
    if (raw === undefined) return
    const value = Number(raw)
    if (!Number.isInteger(value) || value <= 0) {
      throw otelInvalid(`${variable}=${raw} is not a positive integer`)
    }
    options[option] = value
  }
  read(`${prefix}_SCHEDULE_DELAY`, 'scheduledDelayMillis')
  read(`${prefix}_MAX_QUEUE_SIZE`, 'maxQueueSize')
  read(`${prefix}_MAX_EXPORT_BATCH_SIZE`, 'maxExportBatchSize')
  read(`${prefix}_EXPORT_TIMEOUT`, 'exportTimeoutMillis')
  return options
}
