import assert from 'node:assert/strict'
import { registerHooks } from 'node:module'
import { describe, test } from 'node:test'
import { silentLogger } from './log.ts'

// Every module specifier resolved from here on, to show what an export left off never loads.
const resolved: string[] = []
registerHooks({
  resolve(specifier, context, next) {
    resolved.push(specifier)
    return next(specifier, context)
  },
})

const logs = await import('./otel-logs.ts')

describe('audit records as OTel logs: the switch', () => {
  test('only a logs exporter or a logs endpoint asks for it; a general endpoint does not', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }
    assert.equal(logs.logExportRequested({}), false)
    assert.equal(logs.logExportRequested(endpoint), false)
    assert.equal(logs.logExportRequested({ OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: ' ' }), false)
    assert.equal(logs.logExportRequested({ ...endpoint, OTEL_LOGS_EXPORTER: 'otlp' }), true)
    assert.equal(
      logs.logExportRequested({ OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'http://c:4318/v1/logs' }),
      true,
    )
    assert.equal(logs.logExportRequested({ OTEL_LOGS_EXPORTER: 'none', ...endpoint }), false)
    assert.equal(
      logs.logExportRequested({ OTEL_LOGS_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }),
      false,
    )
  })

  test('left off, nothing of the logs SDK is loaded', async () => {
    assert.equal(await logs.startLogExport({}, silentLogger), undefined)
    assert.deepEqual(
      resolved.filter((s) => s.includes('opentelemetry') || s.includes('otel-logs-sdk')),
      [],
    )
  })

  test('a setting it cannot honour is a configuration error, not a silent loss', async () => {
    await assert.rejects(logs.startLogExport({ OTEL_LOGS_EXPORTER: 'console' }, silentLogger), {
      code: 'ERR_CONFIG_INVALID',
    })
    await assert.rejects(
      logs.startLogExport(
        { OTEL_LOGS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        silentLogger,
      ),
      { code: 'ERR_CONFIG_INVALID' },
    )
  })
})
