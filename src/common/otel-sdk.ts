/**
 * The OpenTelemetry SDK, set up from the standard `OTEL_*` variables. Only tracing.ts imports
 * this module, with a dynamic import and only when tracing is asked for, so the SDK and the
 * exporters stay out of a gateway without tracing (in a build they sit in a chunk of their own).
 *
 * Read here: OTEL_TRACES_EXPORTER (`otlp`, `none`), OTEL_EXPORTER_OTLP_PROTOCOL and its
 * TRACES_ variant (`http/protobuf` by default, `http/json`), OTEL_EXPORTER_OTLP_ENDPOINT
 * (`/v1/traces` appended) or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is), OTEL_SERVICE_NAME,
 * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*. The exporter reads the rest
 * itself (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, certificates).
 */
import {
  type Context,
  DiagLogLevel,
  diag,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  type Tracer,
  trace,
} from '@opentelemetry/api'
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import { BarbicanError } from './errors.ts'
import type { Logger } from './log.ts'
import { VERSION } from './version.ts'

/** What a started SDK gives tracing.ts. */
export interface TracingRuntime {
  readonly tracer: Tracer
  /** A context whose parent is `parent` (a remote span context or a local span), for startSpan. */
  readonly parentContext: (parent: SpanContext | Span | undefined) => Context
  /** Exports what is still buffered and stops the exporter. */
  shutdown(): Promise<void>
}

/** Builds the tracer provider, exporter and sampler the environment describes. */
export function createTracingRuntime(env: NodeJS.ProcessEnv, log: Logger): TracingRuntime {
  const exporter = traceExporter(env)
  const processor = new BatchSpanProcessor({ exporter, ...batchOptions(env) })
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'barbican', 'service.version': VERSION }))
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new TracerProvider({
    resource,
    sampler: sampler(env),
    spanProcessors: [processor],
  })
  // Export failures are the SDK's to report: they go to the gateway's log, not to nowhere.
  const otelLog = log.child({ part: 'otel' })
  diag.setLogger(
    {
      error: (message, ...args) => otelLog.warn(message, { details: args }),
      warn: (message, ...args) => otelLog.warn(message, { details: args }),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    DiagLogLevel.WARN,
  )
  return {
    tracer: provider.getTracer('barbican', VERSION),
    parentContext: (parent: SpanContext | Span | undefined): Context => {
      if (parent === undefined) return ROOT_CONTEXT
      return 'spanContext' in parent
        ? trace.setSpan(ROOT_CONTEXT, parent)
        : trace.setSpanContext(ROOT_CONTEXT, parent)
    },
    async shutdown() {
      await provider.shutdown()
      diag.disable()
    },
  }
}

function invalid(message: string): BarbicanError {
  return new BarbicanError('ERR_CONFIG_INVALID', message)
}

function setting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim()
  return value === undefined || value === '' ? undefined : value
}

/** The OTLP/HTTP exporter of the protocol asked for; gRPC is not shipped (docs/observability.md). */
function traceExporter(env: NodeJS.ProcessEnv): SpanExporter {
  const exporter = setting(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase() ?? 'otlp'
  if (exporter !== 'otlp') {
    throw invalid(`OTEL_TRACES_EXPORTER=${exporter} is not supported: use otlp or none`)
  }
  const protocol =
    setting(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ??
    setting(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf'
  const traces = setting(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  const base = setting(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  const url = traces ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`)
  const config = url === undefined ? {} : { url }
  if (protocol === 'http/protobuf') return new ProtobufTraceExporter(config)
  if (protocol === 'http/json') return new JsonTraceExporter(config)
  throw invalid(
    `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf or http/json`,
  )
}

/** OTEL_TRACES_SAMPLER, `parentbased_always_on` by default as the specification says. */
function sampler(env: NodeJS.ProcessEnv): Sampler {
  const name = setting(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on'
  const arg = setting(env, 'OTEL_TRACES_SAMPLER_ARG')
  const ratio = (): number => {
    if (arg === undefined) return 1
    const value = Number(arg)
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw invalid(`OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio between 0 and 1`)
    }
    return value
  }
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio())
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) })
    default:
      throw invalid(
        `OTEL_TRACES_SAMPLER=${name} is not supported: use always_on, always_off, traceidratio or their parentbased_ forms`,
      )
  }
}

/** The batch processor's OTEL_BSP_* settings; the SDK's defaults for those not set. */
function batchOptions(env: NodeJS.ProcessEnv): {
  scheduledDelayMillis?: number
  maxQueueSize?: number
  maxExportBatchSize?: number
  exportTimeoutMillis?: number
} {
  const options: Record<string, number> = {}
  const read = (variable: string, option: string) => {
    const raw = setting(env, variable)
    if (raw === undefined) return
    const value = Number(raw)
    if (!Number.isInteger(value) || value <= 0) {
      throw invalid(`${variable}=${raw} is not a positive integer`)
    }
    options[option] = value
  }
  read('OTEL_BSP_SCHEDULE_DELAY', 'scheduledDelayMillis')
  read('OTEL_BSP_MAX_QUEUE_SIZE', 'maxQueueSize')
  read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 'maxExportBatchSize')
  read('OTEL_BSP_EXPORT_TIMEOUT', 'exportTimeoutMillis')
  return options
}
