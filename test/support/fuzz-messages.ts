/**
 * A seeded, structure-aware generator of client messages for the fuzz test: it starts from a
 * well-formed MCP request, notification or response and mutates its params (look-alike keys,
 * wrong types, missing members, odd `_meta`) or its envelope (ids, versions, method names,
 * mixed members, response shapes reusing the id of a request in flight), and sometimes sends
 * text that is not JSON-RPC at all. Each message says which reply it is owed, so the test can
 * check one reply per request id.
 */
import { isPlainObject } from '../../src/protocol/jsonrpc.ts'

/** A small, fast PRNG (mulberry32): the same seed gives the same messages. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface FuzzMessage {
  /** What goes on the wire (one message, a batch, or any text). */
  readonly text: string
  /**
   * The id of a request whose envelope is intact: it is owed exactly one reply. Undefined for
   * notifications, responses, and requests whose envelope was mutated (owed at most one).
   */
  readonly owed?: string | number
  /** Ids this payload uses as request ids (a reply may carry them, at most once each). */
  readonly requestIds: readonly (string | number)[]
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type Obj = { [key: string]: Json }

/** Valid params per method, the starting point of every request. */
const TEMPLATES: Readonly<Record<string, () => Obj>> = {
  ping: () => ({}),
  'tools/list': () => ({}),
  'tools/call': () => ({ name: 'echo', arguments: { text: 'hi' } }),
  'prompts/list': () => ({}),
  'prompts/get': () => ({ name: 'greet', arguments: { who: 'you' } }),
  'resources/list': () => ({}),
  'resources/templates/list': () => ({}),
  'resources/read': () => ({ uri: 'mem://a' }),
  'resources/subscribe': () => ({ uri: 'mem://a' }),
  'resources/unsubscribe': () => ({ uri: 'mem://a' }),
  'completion/complete': () => ({
    ref: { type: 'ref/prompt', name: 'greet' },
    argument: { name: 'who', value: 'y' },
  }),
  'logging/setLevel': () => ({ level: 'info' }),
  'tasks/list': () => ({}),
  'tasks/get': () => ({ taskId: 'no-such-task' }),
  'server/discover': () => ({}),
}
const METHODS = Object.keys(TEMPLATES)

const NOTIFICATIONS: readonly (() => Obj)[] = [
  () => ({ method: 'notifications/initialized' }),
  () => ({ method: 'notifications/roots/list_changed', params: { Name: 'x', _meta: {} } }),
  () => ({ method: 'notifications/cancelled', params: { requestId: 'never-sent', reason: 'x' } }),
  () => ({ method: 'notifications/progress', params: { progressToken: 'p', progress: 1 } }),
  () => ({ method: 'notifications/unknown', params: { a: 1 } }),
]

const ODD_VALUES: readonly Json[] = [
  null,
  true,
  0,
  -1,
  1.5,
  2 ** 60,
  '',
  ' ',
  'x'.repeat(300),
  '\u0000\u202e\ud83d\ude00',
  [],
  [1, 'a', null],
  {},
  { nested: { deeper: { deepest: [{}] } } },
]

export class MessageFuzzer {
  readonly #random: () => number
  #next = 1
  /** Ids of requests already generated, for responses that reuse them. */
  readonly #sent: (string | number)[] = []

  constructor(seed: number) {
    this.#random = seededRandom(seed)
  }

  #int(n: number): number {
    return Math.floor(this.#random() * n)
  }
  #pick<T>(items: readonly T[]): T {
    return items[this.#int(items.length)]!
  }
  #chance(p: number): boolean {
    return this.#random() < p
  }

  /** A fresh request id, unique in this fuzzer: a number or a string. */
  #freshId(): string | number {
    const n = this.#next++
    return this.#chance(0.5) ? n : `r-${n}`
  }

  /** A key that looks like `key` to a careless reader. */
  #lookAlike(key: string): string {
    return this.#pick([
      key.toUpperCase(),
      key[0]!.toUpperCase() + key.slice(1),
      `${key} `,
      ` ${key}`,
      `${key}\u0000`,
      key.replace(/a/, '\u0430'), // Cyrillic а
      `${key}_`,
      'constructor',
      '__proto__',
    ])
  }

  #mutateParams(params: Obj): Obj {
    const out: Obj = { ...params }
    const keys = Object.keys(out)
    const rounds = 1 + this.#int(3)
    for (let i = 0; i < rounds; i++) {
      const key = keys.length > 0 ? this.#pick(keys) : 'name'
      switch (this.#int(7)) {
        case 0:
          out[this.#lookAlike(key)] = this.#pick(['rm -rf', 'other', 'mem://b', { a: 1 }])
          break
        case 1:
          out[key] = this.#pick(ODD_VALUES)
          break
        case 2:
          delete out[key]
          break
        case 3:
          out._meta = this.#pick<Json>([
            { progressToken: this.#pick(ODD_VALUES) },
            { 'dev.barbican/context': { sub: 'admin' } },
            { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' },
            {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': {},
              'io.modelcontextprotocol/clientInfo': { name: 'fuzz', version: '1' },
            },
            { 'io.modelcontextprotocol/protocolVersion': '1999-01-01' },
            [],
            'meta',
          ])
          break
        case 4:
          out[`extra${this.#int(5)}`] = this.#pick(ODD_VALUES)
          break
        case 5:
          out.arguments = this.#pick<Json>([{ deep: [[[[[{}]]]]] }, [], 'args', null])
          break
        default:
          out.task = this.#pick<Json>([{ ttl: 1000 }, { ttl: 'x' }, null])
      }
    }
    return out
  }

  /** A request, maybe with mutated params; its envelope intact. */
  #request(id: string | number): Obj {
    const method = this.#pick(METHODS)
    let params: Json = TEMPLATES[method]!()
    if (this.#chance(0.6)) params = this.#mutateParams(params)
    if (this.#chance(0.04)) params = this.#pick<Json>([[1], 'p', 3, null])
    const message: Obj = { jsonrpc: '2.0', id, method }
    const empty = isPlainObject(params) && Object.keys(params).length === 0
    if (!(empty && this.#chance(0.3))) message.params = params
    return message
  }

  /** A request whose envelope breaks a rule somewhere. */
  #brokenRequest(): { message: Obj; ids: (string | number)[] } {
    const id = this.#freshId()
    const message = this.#request(id)
    switch (this.#int(8)) {
      case 0:
        message.jsonrpc = this.#pick<Json>(['1.0', 2, null, '2.0 '])
        break
      case 1:
        delete message.jsonrpc
        break
      case 2:
        message.id = this.#pick<Json>([null, 1.5, { a: 1 }, [1], true, 2 ** 60])
        return { message, ids: [] }
      case 3:
        message.method = this.#pick<Json>([
          '',
          7,
          null,
          'Tools/Call',
          'tools/call ',
          'tools/delete',
        ])
        break
      case 4:
        message.result = {}
        break
      case 5:
        message.error = { code: 1, message: 'x' }
        break
      case 6:
        message.extra = 1
        break
      default: {
        const key = this.#lookAlike('id')
        message[key === 'id' ? 'ID' : key] = 99
      }
    }
    return { message, ids: [id] }
  }

  /** A response-shaped message, often numbered like a request already sent (maybe in flight). */
  #response(): Obj {
    const id: Json =
      this.#sent.length > 0 && this.#chance(0.7)
        ? this.#pick(this.#sent.slice(-8))
        : this.#pick<Json>([`barbican-${this.#int(3)}`, 900_000 + this.#int(1000), null])
    const message: Obj = this.#chance(0.5) ? { jsonrpc: '2.0', id } : { id }
    switch (this.#int(5)) {
      case 0:
        message.result = {}
        break
      case 1:
        message.result = this.#pick<Json>(['x', 1, [], null])
        break
      case 2:
        message.error = this.#pick<Json>([
          { code: 1, message: 'm' },
          { code: 'x', message: 'm' },
          { code: 1.5 },
          'oops',
        ])
        break
      case 3:
        message.result = {}
        message.error = { code: 1, message: 'm' }
        break
      default:
        break
    }
    return message
  }

  /** The next payload. */
  next(): FuzzMessage {
    const roll = this.#random()
    if (roll < 0.45) {
      const id = this.#freshId()
      this.#sent.push(id)
      const message = this.#request(id)
      return { text: JSON.stringify(message), owed: id, requestIds: [id] }
    }
    if (roll < 0.6) {
      const { message, ids } = this.#brokenRequest()
      return { text: JSON.stringify(message), requestIds: ids }
    }
    if (roll < 0.75) return { text: JSON.stringify(this.#response()), requestIds: [] }
    if (roll < 0.85) {
      const notification: Obj = { jsonrpc: '2.0', ...this.#pick(NOTIFICATIONS)() }
      return { text: JSON.stringify(notification), requestIds: [] }
    }
    if (roll < 0.93) {
      // A batch: legal only where the negotiated revision allows it; never owed a reply.
      const ids = [this.#freshId(), this.#freshId()]
      const items = [this.#request(ids[0]!), this.#response(), this.#request(ids[1]!)]
      return { text: JSON.stringify(items), requestIds: ids }
    }
    const garbage = this.#pick([
      '',
      '{',
      'null',
      '[]',
      '{}',
      '"jsonrpc"',
      '{"jsonrpc":"2.0","id":1,"method":"ping","id":2}',
      '{"jsonrpc":"2.0","method":"ping","id":',
      '\u00ff\u00fe',
    ])
    if (this.#chance(0.2)) {
      // Valid JSON-RPC naming a method nobody has: owed its error, under its own id.
      const id = this.#freshId()
      return {
        text: `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"${'a'.repeat(50)}"}`,
        owed: id,
        requestIds: [id],
      }
    }
    return { text: garbage, requestIds: [] }
  }
}
