/**
 * A transport made only once some asynchronous work is done: how a confined `npx` upstream gets
 * its package installed outside the sandbox (src/sandbox/npm-install.ts) before its launch is
 * checked and spawned, while the plan's transport factory stays synchronous. `start()` runs
 * `prepare`, then builds the real transport and starts it; everything else is passed through.
 * `closeNote`, when it says something, is added to the error the transport closed with: what
 * the install knows that the server's own exit does not (install scripts it skipped, ADR 107).
 */
import { BarbicanError } from '../common/errors.ts'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { ReceiveInfo, SendOptions, Transport } from '../transports/transport.ts'

export class DeferredTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly #prepare: () => Promise<void>
  readonly #create: () => Transport
  readonly #closeNote: (() => string | undefined) | undefined
  #inner: Transport | undefined
  #closed = false
  #noted: { readonly from: Error; readonly to: Error } | undefined

  constructor(
    prepare: () => Promise<void>,
    create: () => Transport,
    closeNote?: () => string | undefined,
  ) {
    this.#prepare = prepare
    this.#create = create
    this.#closeNote = closeNote
  }

  get closeError(): Error | undefined {
    const error = this.#inner?.closeError
    if (error === undefined || this.#closeNote === undefined) return error
    if (this.#noted?.from === error) return this.#noted.to
    const note = this.#closeNote()
    if (note === undefined) return error
    const to =
      error instanceof BarbicanError
        ? new BarbicanError(error.code, `${error.message}; ${note}`, {
            data: error.data,
            cause: error,
          })
        : new Error(`${error.message}; ${note}`, { cause: error })
    this.#noted = { from: error, to }
    return to
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
