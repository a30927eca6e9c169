import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { serviceIo } from './logging.ts'

describe("serve's own messages on stderr", () => {
  test('become JSON lines when stderr is not a terminal: warnings at warn, the rest at error', () => {
    const written: string[] = []
    const io = serviceIo({ stdout: () => {}, stderr: (t) => written.push(t) }, false)
    io.stderr('barbican: warning: key "x" ignored\n')
    io.stderr(
      'barbican: refusing to listen on 0.0.0.0, which is not a loopback address.\nConfigure inbound auth.\n',
    )
    const records = written.map((line) => JSON.parse(line) as Record<string, unknown>)
    assert.deepEqual(
      records.map((r) => [r.level, r.msg]),
      [
        ['warn', 'key "x" ignored'],
        ['error', 'refusing to listen on 0.0.0.0, which is not a loopback address.'],
        ['error', 'Configure inbound auth.'],
      ],
    )
    assert.ok(written.every((line) => line.endsWith('}\n')))
  })

  test('stay text on a terminal', () => {
    const written: string[] = []
    serviceIo({ stdout: () => {}, stderr: (t) => written.push(t) }, true).stderr('barbican: x\n')
    assert.deepEqual(written, ['barbican: x\n'])
  })
})
