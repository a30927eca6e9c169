/**
 * Validates every message Barbican sends to a client against the official schema of the
 * revision the client negotiated. Wraps the gateway's side of an in-memory transport pair: it
 * learns the method of each client request (to know which result type answers it) and the
 * revision from the initialize exchange, then checks each outgoing message.
 */

import type { JsonRpcMessage } from '../../src/protocol/jsonrpc.ts'
import { isRevision, type Revision } from '../../src/protocol/revisions.ts'
import type { MemoryTransport } from '../../src/transports/memory.ts'
import { assertValidMessage } from './schema.ts'

export interface EmittedLog {
  /** Messages checked so far. */
  count: number
  /** The first validation failure, if any; tests assert it stayed undefined. */
  failure: Error | undefined
}

/**
 * Call after `gateway.connect(transport, …)` (the session has set `onmessage`) and before the
 * client connects.
 */
export function validateEmitted(transport: MemoryTransport): EmittedLog {
  const log: EmittedLog = { count: 0, failure: undefined }
  const methods = new Map<string | number, string>()
  let revision: Revision | undefined
  const receive = transport.onmessage
  transport.onmessage = (message, info) => {
    if ('method' in message && 'id' in message) methods.set(message.id, message.method)
    receive?.(message, info)
  }
  const send = transport.send.bind(transport)
  transport.send = async (message: JsonRpcMessage, options) => {
    const method =
      'id' in message && !('method' in message)
        ? methods.get(message.id as string | number)
        : undefined
    if (method === 'initialize' && 'result' in message) {
      const version = message.result.protocolVersion
      if (isRevision(version)) revision = version
    }
    if (revision && !log.failure) {
      try {
        assertValidMessage(revision, message, method === undefined ? {} : { method })
        log.count++
      } catch (err) {
        log.failure = err as Error
      }
    }
    return await send(message, options)
  }
  return log
}
