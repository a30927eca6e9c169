/**
 * Where sandbox refusals go (issue 18, docs/sandbox.md, ADR 041): a launch that cannot be
 * confined, an egress attempt the proxy refused. Each one is an audit record (an `admin` event
 * acted by `sandbox`, action `sandbox.launch` or `sandbox.egress`, outcome `denied`) and one
 * step of `barbican_sandbox_refusals_total{upstream}`. The audit log and the metrics are handed
 * over once they exist: the plan, whose transports report refusals, is built before the gateway.
 */
import type { AuditSink } from '../audit/audit-log.ts'
import type { Logger } from '../telemetry/log.ts'
import type { GatewayMetrics } from '../telemetry/metrics.ts'
import type { SandboxRefusal, SandboxRefusalSink } from './sandbox.ts'

/** The actor of every sandbox refusal's audit record. */
export const SANDBOX_ACTOR = 'sandbox'

export class SandboxRefusals {
  audit: AuditSink | undefined
  metrics: GatewayMetrics | undefined
  readonly #log: Logger

  constructor(log: Logger, audit?: AuditSink) {
    this.#log = log
    this.audit = audit
  }

  /** The sink handed to the transports. */
  readonly report: SandboxRefusalSink = (refusal: SandboxRefusal) => {
    this.metrics?.sandboxRefusals.labels({ upstream: refusal.upstream }).inc()
    this.audit
      ?.record({
        type: 'admin',
        action: `sandbox.${refusal.kind}`,
        actor: SANDBOX_ACTOR,
        upstream: refusal.upstream,
        ...(refusal.target === undefined ? {} : { target: refusal.target }),
        outcome: 'denied',
        detail: refusal.reason,
      })
      .catch((error: unknown) =>
        this.#log.error('cannot audit a sandbox refusal', { upstream: refusal.upstream, error }),
      )
  }
}
