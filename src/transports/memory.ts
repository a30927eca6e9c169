/**
 * A linked pair of in-memory transports: what one side sends, the other receives, on a later
 * microtask. For tests, and for embedding Barbican in-process. Its shape also fits the official
 * SDK's Transport interface, so an SDK client or server can sit on either end.
 */
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

export class MemoryTransport implements Transport {
  peer: MemoryTransport | undefined
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void
  sessionId?: string
  #closed = false
  #started = false
  #queue: JsonRpcMessage[] = []

  async start(): Promise<void> {
    this.#started = true
    const queued = this.#queue
    this.#queue = []
    for (const message of queued) this.onmessage?.(message)
  }

  async send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    const peer = this.peer
    if (this.#closed || !peer || peer.#closed) throw new Error('Memory transport is closed')
    // Structured clone: the receiver must never share objects with the sender.
    const copy = structuredClone(message)
    queueMicrotask(() => peer.#deliver(copy))
  }

  #deliver(message: JsonRpcMessage): void {
    if (this.#closed) return
    if (!this.#started) this.#queue.push(message)
    else this.onmessage?.(message)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.onclose?.()
    await this.peer?.close()
  }
}

/** Two linked transports: `[a, b]` where a's sends reach b and b's reach a. */
export function memoryPair(): [MemoryTransport, MemoryTransport] {
  const a = new MemoryTransport()
  const b = new MemoryTransport()
  a.peer = b
  b.peer = a
  return [a, b]
}
