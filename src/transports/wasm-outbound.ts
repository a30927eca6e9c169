/**
 * An upstream that is a Wasm module run in-process with Extism, speaking the mcp.run servlet
 * interface: export `describe` returns a ListToolsResult, export `call` takes a CallToolRequest
 * and returns a CallToolResult, JSON in and out. This transport answers the MCP messages a
 * server would (`initialize`, `ping`, `tools/list`, `tools/call`) from those two exports, so the
 * module is one more upstream to the rest of Barbican: namespaced, pinned, policed and audited
 * like the others (ADR 036).
 *
 * What the module may do is what it is granted: HTTP only to `allowedHosts` (checked by Extism
 * before any connection, then by Barbican's guarded fetch at connect time), files only under
 * `allowedPaths`, a memory ceiling checked in the module's own declaration before it is
 * instantiated, and a deadline per call after which its worker is terminated.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { BarbicanError, errorData, jsonRpcCodeOf, upstreamClosed } from '../common/errors.ts'
import { createGuardedFetch, type GuardedFetch } from '../net/guarded-fetch.ts'
import type { JsonRpcId, JsonRpcMessage } from '../protocol/jsonrpc.ts'
import { LATEST_LEGACY_REVISION, LEGACY_REVISIONS } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import type { Transport } from './transport.ts'

/** 64 KiB, the size of one Wasm memory page. */
const PAGE_BYTES = 65_536

/** One Wasm upstream, as the config describes it. */
export interface WasmSpec {
  /** Absolute path or https:// URL of the module. */
  readonly source: string
  /** Hex SHA-256 the module must have (from `barbican.lock`); undefined refuses to load. */
  readonly sha256: string | undefined
  /** Hosts the module's HTTP requests may reach (`*.example.com` globs allowed). */
  readonly allowedHosts: readonly string[]
  /** Host directory → path the module sees it as; none means no file access at all. */
  readonly allowedPaths: Readonly<Record<string, string>>
  /** Values the module reads with Extism's `config_get`. */
  readonly config: Readonly<Record<string, string>>
  /** Ceiling on the module's linear memory; a module that may grow past it is refused. */
  readonly maxMemoryMb: number
  /** Largest module accepted, read or downloaded. */
  readonly maxModuleBytes: number
}

export interface WasmOutboundOptions extends WasmSpec {
  readonly name: string
  readonly log: Logger
  /** Deadline of one `describe` or `call`; past it the module's worker is terminated. */
  readonly callTimeoutMs: number
}

interface Plugin {
  call(name: string, input: string): Promise<{ text(): string } | null>
  close(): Promise<void>
}

/** The module's bytes, after the size, pin and memory checks. */
export async function loadWasmModule(spec: WasmSpec): Promise<Uint8Array> {
  const bytes = await readSource(spec.source, spec.maxModuleBytes)
  const actual = createHash('sha256').update(bytes).digest('hex')
  if (spec.sha256 === undefined) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `Wasm module ${spec.source} is not pinned in barbican.lock (its sha256 is ${actual}); ` +
        'run `barbican lock` to pin it',
    )
  }
  if (actual !== spec.sha256.toLowerCase()) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `Wasm module ${spec.source} has sha256 ${actual}, but barbican.lock pins ${spec.sha256}`,
    )
  }
  checkMemory(bytes, spec.maxMemoryMb, spec.source)
  return bytes
}

/** Hex SHA-256 of a module, for `barbican lock`. */
export async function wasmModuleHash(source: string, maxModuleBytes: number): Promise<string> {
  return createHash('sha256')
    .update(await readSource(source, maxModuleBytes))
    .digest('hex')
}

async function readSource(source: string, maxBytes: number): Promise<Uint8Array> {
  let bytes: Uint8Array
  if (/^https:\/\//i.test(source)) {
    const fetch = createGuardedFetch({ timeoutMs: 30_000 })
    try {
      const response = await fetch(source)
      if (!response.ok) {
        await response.body?.cancel()
        throw new BarbicanError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `Wasm module ${source}: HTTP ${response.status}`,
        )
      }
      const length = Number(response.headers.get('content-length') ?? 0)
      if (length > maxBytes) {
        await response.body?.cancel()
        throw tooLarge(source, maxBytes)
      }
      bytes = new Uint8Array(await response.arrayBuffer())
    } finally {
      await fetch.close()
    }
  } else {
    bytes = await readFile(source).catch((err: NodeJS.ErrnoException) => {
      throw new BarbicanError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `Wasm module ${source} cannot be read: ${err.code ?? err.message}`,
      )
    })
  }
  if (bytes.byteLength > maxBytes) throw tooLarge(source, maxBytes)
  return bytes
}

function tooLarge(source: string, maxBytes: number): BarbicanError {
  return new BarbicanError(
    'ERR_LAUNCH_REFUSED',
    `Wasm module ${source} is larger than maxModuleBytes (${maxBytes})`,
  )
}

/**
 * Extism's JavaScript runtime has no memory limit of its own, but a Wasm memory can never grow
 * past the maximum its module declares. So a module is accepted only when it declares a
 * maximum within the ceiling, and neither imports a memory nor declares one without a maximum.
 */
export function checkMemory(bytes: Uint8Array, maxMemoryMb: number, source: string): void {
  const maxPages = Math.floor((maxMemoryMb * 1024 * 1024) / PAGE_BYTES)
  const refuse = (why: string) =>
    new BarbicanError('ERR_LAUNCH_REFUSED', `Wasm module ${source}: ${why}`)
  let pos = 8
  const byte = () => {
    if (pos >= bytes.length) throw refuse('truncated module')
    return bytes[pos++] as number
  }
  const leb = () => {
    let result = 0
    let shift = 0
    for (;;) {
      const b = byte()
      result += (b & 0x7f) * 2 ** shift
      if ((b & 0x80) === 0) return result
      shift += 7
      if (shift > 63) throw refuse('malformed LEB128 number')
    }
  }
  const skipName = () => {
    const length = leb() // read first: `pos += leb()` would add to the old position
    pos += length
  }
  const limits = (): { max: number | undefined } => {
    const flags = byte()
    leb()
    return { max: flags & 1 ? leb() : undefined }
  }
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73) {
    throw refuse('not a Wasm module')
  }
  let memories = 0
  while (pos < bytes.length) {
    const id = byte()
    const size = leb()
    const end = pos + size
    if (id === 2) {
      // Imports: a memory handed in from outside is not bounded by the module.
      for (let n = leb(); n > 0; n--) {
        skipName()
        skipName()
        const kind = byte()
        if (kind === 2) throw refuse('imports its memory, which cannot be bounded')
        if (kind === 0) leb()
        else if (kind === 1) {
          byte()
          limits()
        } else if (kind === 3) pos += 2
        else if (kind === 4) {
          byte()
          leb()
        } else throw refuse(`unknown import kind ${kind}`)
      }
    } else if (id === 5) {
      for (let n = leb(); n > 0; n--) {
        memories++
        const { max } = limits()
        if (max === undefined)
          throw refuse('declares a memory without a maximum, which cannot be bounded')
        if (max > maxPages)
          throw refuse(
            `may grow its memory to ${(max * PAGE_BYTES) / 1048576} MiB, over maxMemoryMb (${maxMemoryMb})`,
          )
      }
    }
    pos = end
  }
  // No memory at all is fine: such a module cannot hold data past its stack.
  if (memories === 0) return
}

/** Runs one module and speaks MCP for it. */
export class WasmOutboundTransport implements Transport {
  onmessage?: (message: JsonRpcMessage) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly #options: WasmOutboundOptions
  #bytes: Uint8Array | undefined
  #plugin: Promise<Plugin> | undefined
  #fetch: GuardedFetch | undefined
  /** Calls run one at a time: an Extism plugin is not re-entrant. */
  #queue: Promise<unknown> = Promise.resolve()
  #closed = false

  constructor(options: WasmOutboundOptions) {
    this.#options = options
  }

  async start(): Promise<void> {
    this.#bytes = await loadWasmModule(this.#options)
    await this.#pluginReady()
    this.#options.log.info('wasm module loaded', {
      upstream: this.#options.name,
      allowedHosts: this.#options.allowedHosts,
    })
  }

  async send(message: JsonRpcMessage): Promise<void> {
    if (this.#closed) throw closedError(this.#options.name)
    if (!('method' in message)) return // responses to requests we never make
    if (!('id' in message) || message.id === undefined) return // notifications: nothing to do
    const id = message.id as JsonRpcId
    const params = (message.params ?? {}) as Record<string, unknown>
    const reply = (body: Record<string, unknown>) =>
      queueMicrotask(() => {
        if (!this.#closed) this.onmessage?.({ jsonrpc: '2.0', id, ...body } as JsonRpcMessage)
      })
    switch (message.method) {
      case 'initialize': {
        const asked = params.protocolVersion
        const protocolVersion =
          typeof asked === 'string' && (LEGACY_REVISIONS as readonly string[]).includes(asked)
            ? asked
            : LATEST_LEGACY_REVISION
        reply({
          result: {
            protocolVersion,
            capabilities: { tools: {} },
            serverInfo: { name: this.#options.name, version: 'wasm' },
          },
        })
        return
      }
      case 'ping':
        reply({ result: {} })
        return
      case 'tools/list':
      case 'tools/call': {
        const isList = message.method === 'tools/list'
        const input = isList
          ? ''
          : JSON.stringify({
              method: 'tools/call',
              params: { name: params.name, arguments: params.arguments ?? {} },
            })
        this.#run(isList ? 'describe' : 'call', input).then(
          (result) => reply({ result }),
          (err: Error) =>
            reply(
              isList || err instanceof BarbicanError
                ? { error: errorBody(err) }
                : // A failure inside the tool is the tool's answer, as a server would give it.
                  { result: { content: [{ type: 'text', text: err.message }], isError: true } },
            ),
        )
        return
      }
      default:
        reply({ error: { code: -32601, message: `Method not found: ${message.method}` } })
    }
  }

  #run(fn: 'describe' | 'call', input: string): Promise<Record<string, unknown>> {
    const run = this.#queue.then(() => this.#runNow(fn, input))
    this.#queue = run.catch(() => {})
    return run
  }

  async #runNow(fn: 'describe' | 'call', input: string): Promise<Record<string, unknown>> {
    const plugin = await this.#pluginReady()
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new BarbicanError(
            'ERR_UPSTREAM_TIMEOUT',
            `Wasm upstream "${this.#options.name}": ${fn} ran past ${this.#options.callTimeoutMs} ms and was stopped`,
          ),
        )
      }, this.#options.callTimeoutMs)
    })
    try {
      const output = await Promise.race([plugin.call(fn, input), deadline])
      const text = output?.text() ?? ''
      let value: unknown
      try {
        value = JSON.parse(text)
      } catch {
        throw new BarbicanError(
          'ERR_UPSTREAM_PROTOCOL',
          `Wasm upstream "${this.#options.name}": ${fn} returned no JSON object`,
        )
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new BarbicanError(
          'ERR_UPSTREAM_PROTOCOL',
          `Wasm upstream "${this.#options.name}": ${fn} returned no JSON object`,
        )
      }
      return value as Record<string, unknown>
    } catch (err) {
      // A trapped, failed or stopped call leaves the worker unusable: start a fresh one.
      this.#discardPlugin()
      throw err
    } finally {
      clearTimeout(timer)
    }
  }

  #pluginReady(): Promise<Plugin> {
    this.#plugin ??= this.#createPlugin()
    return this.#plugin
  }

  async #createPlugin(): Promise<Plugin> {
    const { createPlugin } = await import('@extism/extism')
    const o = this.#options
    // The guarded fetch checks every address at connect time; hosts granted explicitly may be
    // special (loopback, private), as the operator listed them.
    this.#fetch ??= createGuardedFetch({ allow: o.allowedHosts, timeoutMs: o.callTimeoutMs })
    const paths = Object.keys(o.allowedPaths).length > 0
    return (await createPlugin(
      { wasm: [{ data: this.#bytes as Uint8Array }] },
      {
        runInWorker: true,
        useWasi: paths,
        allowedHosts: [...o.allowedHosts],
        allowedPaths: { ...o.allowedPaths },
        config: { ...o.config },
        fetch: this.#fetch as unknown as typeof fetch,
        logger: moduleLogger(o.log, o.name),
      },
    )) as unknown as Plugin
  }

  #discardPlugin(): void {
    const plugin = this.#plugin
    this.#plugin = undefined
    plugin?.then((p) => p.close()).catch(() => {})
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const plugin = this.#plugin
    this.#plugin = undefined
    await plugin?.then((p) => p.close()).catch(() => {})
    await this.#fetch?.close()
    this.onclose?.()
  }
}

function closedError(name: string): BarbicanError {
  return upstreamClosed(name, 'is closed')
}

function errorBody(err: Error): Record<string, unknown> {
  return err instanceof BarbicanError
    ? { code: jsonRpcCodeOf(err.code), message: err.message, data: errorData(err) }
    : { code: -32603, message: err.message }
}

/** What the module logs through Extism goes to Barbican's log, tagged with the upstream. */
function moduleLogger(log: Logger, name: string): Console {
  const at =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (...args: unknown[]) =>
      log[level]('wasm module log', { upstream: name, message: args.map(String).join(' ') })
  return {
    ...console,
    debug: at('debug'),
    info: at('info'),
    log: at('info'),
    warn: at('warn'),
    error: at('error'),
  } as Console
}
