/**
 * A transport made only once some asynchronous work is done: how a confined `npx` upstream gets
 * its package installed outside the sandbox (src/sandbox/npm-install.ts) before its launch is
 * checked and spawned, while the plan's transport factory stays synchronous. `start()` runs
 * `prepare`, then builds the real transport and starts it; everything else is passed through.
 */
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { ReceiveInfo, SendOptions, Transport } from '../transports/transport.ts'

export class DeferredTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly #prepare: () => Promise<void>
  readonly #create: () => Transport
  #inner: Transport | undefined
  #closed = false

  constructor(prepare: () => Promise<void>, create: () => Transport) {
    this.#prepare = prepare
    this.#create = create
  }

  get closeError(): Error | undefined {
    return this.#inner?.closeError
  }

  get sessionId(): string | undefined {
    return this.#inner?.sessionId
  }

  async start(): Promise<void> {
    await this.#prepare()
    if (this.#closed) throw new Error('closed while preparing')
    const inner = this.#create()
    this.#inner = inner
    inner.onmessage = (message, info) => this.onmessage?.(message, info)
    inner.onclose = () => this.onclose?.()
    inner.onerror = (error) => this.onerror?.(error)
    await inner.start()
  }

  send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    if (!this.#inner) return Promise.reject(new Error('not started'))
    return this.#inner.send(message, options)
  }

  setProtocolVersion(revision: Parameters<NonNullable<Transport['setProtocolVersion']>>[0]): void {
    this.#inner?.setProtocolVersion?.(revision)
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#inner?.close()
  }
}
