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
import { VERSION } from '../common/version.ts'
import type { Logger } from './log.ts'
import { otelBatchOptions, otelInvalid, otelSetting, otlpTarget } from './otel-env.ts'

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
  const processor = new BatchSpanProcessor({ exporter, ...otelBatchOptions(env, 'OTEL_BSP') })
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

/** The OTLP/HTTP exporter of the protocol asked for (docs/observability.md). */
function traceExporter(env: NodeJS.ProcessEnv): SpanExporter {
  const { protocol, config } = otlpTarget(env, 'TRACES')
  return protocol === 'http/protobuf'
    ? new ProtobufTraceExporter(config)
    : new JsonTraceExporter(config)
}

function sampler(env: NodeJS.ProcessEnv): Sampler {
  const name = otelSetting(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on'
  const arg = otelSetting(env, 'OTEL_TRACES_SAMPLER_ARG')
  const ratio = (): number => {
    if (arg === undefined) return 1
    const value = Number(arg)
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw otelInvalid(`OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio between 0 and 1`)
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
      throw otelInvalid(
        `OTEL_TRACES_SAMPLER=${name} is not supported: use always_on, always_off, traceidratio or their parentbased_ forms`,
      )
  }
}

/** The batch processor's OTEL_BSP_* settings; the SDK's defaults for those not set. */
