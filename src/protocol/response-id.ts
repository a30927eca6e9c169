/**
 * The id of a JSON-RPC response that will never be parsed: a line beyond the message limit, or
 * a message a structural limit refused. Knowing it lets the one request it answers fail at once,
 * naming the limit, instead of waiting for its timeout while the upstream goes on serving.
 *
 * A streaming scan of one JSON object's top level, byte by byte, in constant memory: the raw
 * value of its `id` member, and whether it has a `method` member (then it is a request or a
 * notification, not a response). Members may come in any order: the official SDK writes the id
 * last, after the whole result. Anything malformed simply yields no id.
 */
import type { JsonRpcId } from './jsonrpc.ts'

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const COMMA = 0x2c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

/** Longest id kept, in bytes of its JSON text; a longer one is no id Barbican ever sent. */
const MAX_ID_BYTES = 128
/** Longest top-level key remembered: long enough for "method". */
const MAX_KEY_BYTES = 8

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d
}

/** Feed it the bytes of one message in order, then ask for `responseId()`. */
export class ResponseIdScanner {
  /** Nesting depth: 1 inside the top-level object. */
  #depth = 0
  #inString = false
  #escaped = false
  /** At depth 1, the next string is a member name. */
  #expectKey = false
  /** Bytes of the member name being read at depth 1 (undefined: not reading one). */
  #key: number[] | undefined
  /** The last member name read at depth 1. */
  #lastKey = ''
  /** Raw bytes of the id's value while it is being read. */
  #value: number[] | undefined
  #ids: string[] = []
  #hasMethod = false
  /** The top-level object has closed: only whitespace may follow. */
  #done = false
  /** The text is not one JSON object (or an id is unusable): no answer. */
  #broken = false

  push(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length && !this.#broken; i++) this.#byte(bytes[i]!)
  }

  /** The id of the response these bytes held, if they were one and it could be read. */
  responseId(): JsonRpcId | undefined {
    if (this.#broken || !this.#done || this.#hasMethod || this.#ids.length !== 1) return undefined
    try {
      const id: unknown = JSON.parse(this.#ids[0]!)
      return typeof id === 'number' || typeof id === 'string' ? id : undefined
    } catch {
      return undefined
    }
  }

  #byte(b: number): void {
    if (this.#inString) {
      if (this.#escaped) this.#escaped = false
      else if (b === BACKSLASH) this.#escaped = true
      else if (b === QUOTE) {
        this.#inString = false
        if (this.#key !== undefined) {
          this.#lastKey = this.#key.length <= MAX_KEY_BYTES ? Buffer.from(this.#key).toString() : ''
          this.#key = undefined
          return
        }
      }
      if (this.#key === undefined) this.#record(b)
      else if (this.#key.length <= MAX_KEY_BYTES) this.#key.push(b)
      return
    }
    if (this.#depth === 0) {
      if (b === OPEN_BRACE && !this.#done) {
        this.#depth = 1
        this.#expectKey = true
      } else if (!isSpace(b)) this.#broken = true
      return
    }
    if (this.#depth > 1) {
      if (b === QUOTE) this.#inString = true
      else if (b === OPEN_BRACE || b === OPEN_BRACKET) this.#depth++
      else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) this.#depth--
      return
    }
    // Depth 1: the members of the top-level object.
    if (b === QUOTE) {
      this.#inString = true
      if (this.#expectKey) this.#key = []
      else this.#record(b)
    } else if (b === COLON) {
      this.#expectKey = false
      if (this.#lastKey === 'id') this.#value = []
      else if (this.#lastKey === 'method') this.#hasMethod = true
    } else if (b === COMMA || b === CLOSE_BRACE) {
      if (this.#value !== undefined) this.#ids.push(Buffer.from(this.#value).toString())
      this.#value = undefined
      this.#expectKey = true
      if (b === CLOSE_BRACE) {
        this.#depth = 0
        this.#done = true
      }
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      // An object or array as the id is no id.
      if (this.#value !== undefined) this.#broken = true
      this.#depth++
    } else if (!isSpace(b)) {
      this.#record(b)
    }
  }

  /** Keeps a byte of the id's value while one is being read at depth 1. */
  #record(b: number): void {
    const value = this.#value
    if (value === undefined) return
    if (value.length >= MAX_ID_BYTES) this.#broken = true
    else value.push(b)
  }
}

/** The id of the response `text` holds, read without parsing it (see ResponseIdScanner). */
export function responseIdOf(text: string): JsonRpcId | undefined {
  const scanner = new ResponseIdScanner()
  scanner.push(Buffer.from(text, 'utf8'))
  return scanner.responseId()
}
