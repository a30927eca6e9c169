import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, test } from 'node:test'
import { silentLogger } from '../telemetry/log.ts'
import { admitHttpSession, SessionLimits } from './session-limits.ts'

interface Fake {
  readonly name: string
  lastActivity: number
  busy: boolean
}

function limits(maxSessions: number, maxSessionsPerIdentity: number) {
  const evicted: string[] = []
  const l = new SessionLimits<Fake>(
    { maxSessions, maxSessionsPerIdentity },
    {
      idle: (s) => !s.busy,
      lastActivity: (s) => s.lastActivity,
      evict: (s, bound) => evicted.push(`${s.name}:${bound}`),
    },
    'test',
    silentLogger,
  )
  let clock = 0
  const open = (owner: string, name: string): Fake | number => {
    const admission = l.admit(owner)
    if (!admission.ok) return admission.status
    const session = { name, lastActivity: clock++, busy: false }
    l.add(owner, session)
    return session
  }
  return { l, evicted, open }
}

describe('session limits', () => {
  test('a caller at its bound evicts its own least recently active idle session, nobody else’s', () => {
    const { l, evicted, open } = limits(100, 2)
    const a1 = open('alice', 'a1') as Fake
    open('bob', 'b1')
    const a2 = open('alice', 'a2') as Fake
    a1.lastActivity = 10 // used after a2: a2 is now the least recently active
    open('alice', 'a3')
    assert.deepEqual(evicted, ['a2:maxSessionsPerIdentity'])
    assert.equal(l.countOf('alice'), 2)
    assert.equal(l.countOf('bob'), 1)
    assert.equal(l.size, 3)
    l.remove(a2) // the evicted session's own end is harmless
    assert.equal(l.size, 3)
  })

  test('a session working on a request is never evicted: 429 when all of the caller’s are busy', () => {
    const { evicted, open } = limits(100, 2)
    const a1 = open('alice', 'a1') as Fake
    open('alice', 'a2')
    a1.busy = true
    const a3 = open('alice', 'a3') as Fake
    assert.deepEqual(evicted, ['a2:maxSessionsPerIdentity'], 'the older a1 is busy, a2 goes')
    a3.busy = true
    assert.equal(open('alice', 'a4'), 429)
    assert.equal(typeof open('bob', 'b1'), 'object', 'another caller is not locked out')
  })

  test('at maxSessions the least recently active idle session of anyone goes; 503 if none is idle', () => {
    const { evicted, open } = limits(3, 3)
    open('alice', 'a1')
    const b1 = open('bob', 'b1') as Fake
    open('alice', 'a2')
    open('carol', 'c1')
    assert.deepEqual(evicted, ['a1:maxSessions'])
    b1.busy = true
    open('dave', 'd1')
    assert.deepEqual(evicted, ['a1:maxSessions', 'a2:maxSessions'])
    assert.equal(evicted.includes('b1:maxSessions'), false)
  })

  test('503 when the transport is full of busy sessions', () => {
    const { open } = limits(2, 2)
    ;(open('alice', 'a1') as Fake).busy = true
    ;(open('bob', 'b1') as Fake).busy = true
    assert.equal(open('carol', 'c1'), 503)
  })
})

describe('admitHttpSession', () => {
  test('admits with the owner, then refuses over HTTP with a JSON-RPC error and Retry-After', async (t) => {
    const { l } = limits(1, 1)
    const owners: (string | undefined)[] = []
    const server = createServer((req, res) => {
      const owner = admitHttpSession(l, req, res)
      owners.push(owner)
      if (owner === undefined) return
      // Busy, so the next session cannot evict it and must be refused.
      l.add(owner, { name: 'held', lastActivity: 0, busy: true })
      res.end('admitted')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.after(() => server.close())
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`

    const first = await fetch(url)
    assert.equal(await first.text(), 'admitted')
    const second = await fetch(url)
    assert.equal(second.status, 429)
    assert.equal(second.headers.get('retry-after'), '5')
    const body = (await second.json()) as { jsonrpc: string; id: null; error: { message: string } }
    assert.equal(body.jsonrpc, '2.0')
    assert.equal(body.id, null)
    assert.equal(body.error.message, 'Too many sessions for this caller, all of them busy')
    assert.deepEqual(owners, ['address:127.0.0.1', undefined])
  })
})
