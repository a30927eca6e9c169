/**
 * A WebSocket client's retry relayed to the replica holding its call carries the client's own
 * credential (docs/decisions/088): two in-process replicas on PostgreSQL and Redis, API keys on,
 * a legacy upstream that asks for a confirmation mid-call. The first round goes to A over a
 * WebSocket, the retry to B over another; B relays it to A with the key of B's socket, and A
 * checks that key again: the caller's own retry completes, another caller's presentation of the
 * same state is refused without taking it.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { joinFleet, serveInFleet } from '../../src/app/fleet.ts'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { openPostgresPool } from '../../src/store/postgres.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import {
  dropPostgresSchemas,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { StatelessSocket } from '../support/stateless.ts'

type Json = Record<string, unknown>

const fixture = fileURLToPath(new URL('../fixtures/bridge-upstream.ts', import.meta.url))
const TOOL = 'test_report_meta_after_input'
const ANSWER = { action: 'accept', content: { ok: true } }

describe('a relayed WebSocket retry is authenticated again by the holder', () => {
  const alice = generateApiKey()
  const mallory = generateApiKey()
  const closers: (() => Promise<unknown>)[] = []
  let a: RunningServer
  let b: RunningServer
  const savedKey = process.env.BARBICAN_STATE_KEY

  before(async () => {
    // In one process both replicas read the state key from this process's environment.
    process.env.BARBICAN_STATE_KEY = randomBytes(32).toString('hex')
    const url = await freshPostgresUrl()
    await (await openPostgresPool(url)).end()
    const config = normalizeConfig({
      listen: '127.0.0.1:0',
      store: { postgres: { url } },
      redis: { url: REDIS_URL, prefix: freshRedisPrefix() },
      upstreams: {
        legacy: { command: process.execPath, args: [fixture, '--era', 'legacy'], sandbox: 'none' },
      },
      auth: {
        apiKeys: {
          keys: [
            { id: 'alice', hash: alice.hash, subject: 'alice' },
            { id: 'mallory', hash: mallory.hash, subject: 'mallory' },
          ],
        },
      },
    })
    const replicas: RunningServer[] = []
    for (let i = 0; i < 2; i++) {
      const cluster = await joinFleet(config.redis, {}, silentLogger)
      assert.ok(cluster)
      closers.push(() => cluster.leave())
      const server = await startServer(config, silentLogger)
      closers.push(() => server.stop())
      await serveInFleet(cluster, server, {})
      replicas.push(server)
    }
    ;[a, b] = replicas as [RunningServer, RunningServer]
  })

  after(async () => {
    for (const close of closers.reverse()) await close().catch(() => {})
    await dropPostgresSchemas()
    if (savedKey === undefined) delete process.env.BARBICAN_STATE_KEY
    else process.env.BARBICAN_STATE_KEY = savedKey
  })

  const socketAs = (server: RunningServer, key: string) =>
    StatelessSocket.open(server.url, '/ws', { authorization: `Bearer ${key}` })

  /** Alice's first round on A: the question's key and the sealed state. */
  async function firstRound(): Promise<{ input: string; state: string }> {
    const socket = await socketAs(a, alice.key)
    try {
      const deadline = Date.now() + 60_000
      for (;;) {
        const reply = await socket.call({ name: TOOL, capabilities: { elicitation: {} } })
        const result = reply.result as Json | undefined
        if (result?.resultType === 'input_required') {
          const [input] = Object.keys(result.inputRequests as Json)
          return { input: input!, state: String(result.requestState) }
        }
        assert.ok(Date.now() < deadline, `no input_required: ${JSON.stringify(reply)}`)
        await sleep(200)
      }
    } finally {
      socket.close()
    }
  }

  const resume = (socket: StatelessSocket, round: { input: string; state: string }) =>
    socket.call({
      name: TOOL,
      params: { inputResponses: { [round.input]: ANSWER }, requestState: round.state },
      capabilities: { elicitation: {} },
    })

  test("another caller's retry is refused; the caller's own, relayed with its key, completes", async () => {
    const round = await firstRound()
    const onB = await socketAs(b, mallory.key)
    try {
      const stolen = await resume(onB, round)
      const error = stolen.error as Json | undefined
      assert.equal(error?.code, -32602, JSON.stringify(stolen))
      assert.match(String(error?.message), /requestState is invalid/)
    } finally {
      onB.close()
    }
    const own = await socketAs(b, alice.key)
    try {
      const reply = await resume(own, round)
      assert.equal(reply.error, undefined, JSON.stringify(reply.error))
      const result = reply.result as { resultType: string; content: { text: string }[] }
      assert.equal(result.resultType, 'complete')
      const seen = JSON.parse(result.content[0]!.text) as { answer: unknown; meta: Json }
      assert.deepEqual(seen.answer, { ok: true })
    } finally {
      own.close()
    }
  })
})
