/**
 * Checks what an upstream received (the lines test/fixtures/upstream-recorder.ts recorded):
 * nothing but clean JSON-RPC, and requests and notifications carrying only the params members
 * their method defines (protocol/methods.ts) plus `_meta`.
 */
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { isPlainObject } from '../../src/protocol/jsonrpc.ts'
import { methodSpec } from '../../src/protocol/methods.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { grantTo } from './sandbox.ts'

/** Every recorded message, parsed; a line that is not JSON is kept as its text. */
export function recordedMessages(file: string): unknown[] {
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return []
  }
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as unknown
      } catch {
        return line
      }
    })
}

/** Why `message` is not clean JSON-RPC from Barbican to an upstream; undefined when it is. */
export function upstreamFault(message: unknown): string | undefined {
  if (!isPlainObject(message)) return 'not a JSON object'
  if (message.jsonrpc !== '2.0') return 'jsonrpc is not "2.0"'
  const id = message.id
  const idOk = typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))
  if ('id' in message && !idOk) return `bad id ${JSON.stringify(id)}`
  if (typeof message.method !== 'string') {
    if (!idOk) return 'a response without an id'
    return 'result' in message !== 'error' in message ? undefined : 'neither request nor response'
  }
  const spec = methodSpec(message.method)
  if (!spec) return `unknown method ${message.method}`
  if (spec.direction === 'toClient') return `${message.method} is not sent to servers`
  if (spec.kind === 'request' && !idOk) return `request ${message.method} without an id`
  if (spec.kind === 'notification' && 'id' in message) return `notification with an id`
  const extra = Object.keys(message).filter(
    (k) => !['jsonrpc', 'id', 'method', 'params'].includes(k),
  )
  if (extra.length > 0) return `extra envelope members ${extra.join(', ')}`
  if (!('params' in message)) return undefined
  if (!isPlainObject(message.params)) return 'params is not an object'
  const undefinedMembers = Object.keys(message.params).filter(
    (k) => k !== '_meta' && !spec.params.includes(k),
  )
  if (undefinedMembers.length > 0) {
    return `${message.method} carries members it does not define: ${JSON.stringify(undefinedMembers)}`
  }
  return undefined
}

/** Every fault in what the upstream received, each with the offending message. */
export function upstreamFaults(file: string): string[] {
  const faults: string[] = []
  for (const message of recordedMessages(file)) {
    const fault = upstreamFault(message)
    if (fault) faults.push(`${fault}: ${JSON.stringify(message).slice(0, 300)}`)
  }
  return faults
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const RECORDER = join(ROOT, 'test/fixtures/upstream-recorder.ts')

/**
 * A gateway whose one upstream, `rec`, records every line it receives into `record`. The
 * recorder runs in the default sandbox; its record folder is granted as an operator would.
 */
export async function startRecordingGateway(
  prefix: string,
): Promise<{ server: RunningServer; record: string }> {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const record = join(dir, 'received.jsonl')
  grantTo('rec', dir)
  const text = JSON.stringify({
    listen: '127.0.0.1:0',
    upstreams: {
      rec: {
        command: process.execPath,
        args: [RECORDER, record],
        sandbox: { fs: { write: [dir] } },
      },
    },
    servers: { default: { upstreams: ['rec'] } },
  })
  const { config } = parseConfigText(text, { cwd: ROOT })
  return { server: await startServer(config, silentLogger), record }
}
