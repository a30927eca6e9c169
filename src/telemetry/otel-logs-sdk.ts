/**
 * The OpenTelemetry logs SDK, set up from the standard `OTEL_*` variables, for audit records.
 * Only otel-logs.ts imports this module, dynamically and only when the export is asked for.
 *
 * Read here: OTEL_LOGS_EXPORTER (`otlp`), OTEL_EXPORTER_OTLP_PROTOCOL and its LOGS_ variant
 * (`http/protobuf` by default, `http/json`), OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (as is) or
 * OTEL_EXPORTER_OTLP_ENDPOINT (`/v1/logs` appended), OTEL_SERVICE_NAME, OTEL_BLRP_*. The
 * exporter reads the rest itself (headers, timeout, compression, certificates).
 */
import { type AnyValue, SeverityNumber } from '@opentelemetry/api'
import { OTLPLogExporter as JsonLogExporter } from '@opentelemetry/exporter-logs-otlp-http'
import { OTLPLogExporter as ProtobufLogExporter } from '@opentelemetry/exporter-logs-otlp-proto'
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources'
import {
  BatchLogRecordProcessor,
  LoggerProvider,
  type LogRecordExporter,
} from '@opentelemetry/sdk-logs'
import { VERSION } from '../common/version.ts'
import type { Logger } from './log.ts'
import { otelBatchOptions, otlpTarget } from './otel-env.ts'

/** One exported audit record: the flat field set of docs/audit.md. */
export type ExportedFields = Readonly<Record<string, unknown>>

/** What a started logs SDK gives the audit log. */
export interface LogExport {
  /** Queues one record for export (batched; never blocks, never throws). */
  emit(fields: ExportedFields): void
  /** Exports what is still queued and stops the exporter. */
  shutdown(): Promise<void>
}

export function createLogExport(env: NodeJS.ProcessEnv, log: Logger): LogExport {
  const exporter = logExporter(env)
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'barbican', 'service.version': VERSION }))
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new LoggerProvider({
    resource,
    processors: [new BatchLogRecordProcessor({ exporter, ...otelBatchOptions(env, 'OTEL_BLRP') })],
  })
  const logger = provider.getLogger('barbican.audit', VERSION)
  const otelLog = log.child({ part: 'otel-logs' })
  return {
    emit(fields) {
      try {
        logger.emit(logRecordOf(fields))
      } catch (error) {
        otelLog.warn('an audit record could not be queued for OTel export', { error })
      }
    },
    async shutdown() {
      try {
        await provider.shutdown()
      } catch (error) {
        otelLog.warn('the last audit records could not be exported as OTel logs', { error })
      }
    },
  }
}

/**
 * One audit record as an OTel log record (docs/audit.md "SIEM fields"): the event name, a
 * severity by outcome, a one-line body, the well-known attributes SIEMs map (`user.id`,
 * `mcp.method.name`, `gen_ai.tool.name`, `error.type`, `trace_id`), and every field of the record
 * under `barbican.audit.*`, nested values as JSON text.
 */
export function logRecordOf(fields: ExportedFields) {
  const attributes: Record<string, AnyValue> = {}
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined || value === null) continue
    attributes[`barbican.audit.${key}`] =
      typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
        ? value
        : JSON.stringify(value)
  }
  const type = String(fields.type)
  const outcome = String(fields.outcome)
  const who = fields.type === 'admin' ? fields.actor : fields.subject
  if (typeof who === 'string') attributes['user.id'] = who
  if (typeof fields.method === 'string') attributes['mcp.method.name'] = fields.method
  if (fields.method === 'tools/call' && typeof fields.target === 'string') {
    attributes['gen_ai.tool.name'] = fields.target
  }
  if (typeof fields.errorCode === 'string') attributes['error.type'] = fields.errorCode
  if (typeof fields.traceId === 'string') attributes.trace_id = fields.traceId
  const what = fields.type === 'admin' ? fields.action : fields.method
  const target = typeof fields.target === 'string' ? ` ${fields.target}` : ''
  const timestamp = typeof fields.timestamp === 'string' ? new Date(fields.timestamp) : new Date()
  // A published checkpoint (audit/publish.ts, ADR 102): no outcome, nobody acting.
  const checkpoint = type === 'checkpoint'
  return {
    eventName: `barbican.audit.${type}`,
    timestamp,
    severityNumber: checkpoint || outcome === 'ok' ? SeverityNumber.INFO : SeverityNumber.WARN,
    severityText: checkpoint || outcome === 'ok' ? 'INFO' : 'WARN',
    body: checkpoint
      ? `checkpoint ${String(fields.number)} (${String(fields.reason)}) covers record ${String(fields.seq)}`
      : `${String(who)} ${String(what)}${target}: ${outcome}`,
    attributes,
  }
}

/** The OTLP/HTTP exporter of the protocol asked for (as for traces). */
function logExporter(env: NodeJS.ProcessEnv): LogRecordExporter {
  const { protocol, config } = otlpTarget(env, 'LOGS')
  return protocol === 'http/protobuf'
    ? new ProtobufLogExporter(config)
    : new JsonLogExporter(config)
}
