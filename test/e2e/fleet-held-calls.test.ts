/**
 * Held 2026-07-28 calls resume on any replica (docs/decisions/081): three `barbican serve`
 * processes on one PostgreSQL and one Redis, a legacy upstream that asks for a confirmation in
 * the middle of its call. The first round lands on one replica, the retry on another, which
 * relays it to the replica holding the call; the call completes with the client's answer. The
 * same over WebSocket (docs/decisions/088): the retry sent on a socket to another replica is
 * posted to the holder, and its answer comes back on the socket. When the holder is killed, a
 * retry elsewhere gets a clear error at once, not a hang.
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  dropPostgresSchemas,
  FLEET_AUDIT_KEY,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { freePort, type ServeReplica, startServeReplica } from '../support/fleet.ts'
import { postStatelessToolCall, StatelessSocket } from '../support/stateless.ts'

type Json = Record<string, unknown>

const root = join(import.meta.dirname, '../..')
const fixture = join(root, 'test/fixtures/bridge-upstream.ts')
const TOOL = 'test_report_meta_after_input'
const ANSWER = { action: 'accept', content: { ok: true } }
const filesystem = join(root, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')

describe('held calls across three replicas', { timeout: 300_000 }, () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-fleet-held-')))
  const replicas: ServeReplica[] = []
  /** The folder the `files` upstream serves: where a program's confirmed write lands. */
  const dataDir = join(dir, 'data')

  before(
    async () => {
      const env = {
        BARBICAN_POSTGRES_URL: await freshPostgresUrl(),
        BARBICAN_REDIS_URL: REDIS_URL,
        BARBICAN_AUDIT_KEY: FLEET_AUDIT_KEY,
      }
      const prefix = freshRedisPrefix()
      mkdirSync(dataDir)
      for (const name of ['a', 'b', 'c']) {
        // One at a time: the first pins the upstream's tools, the others find the pins.
        const replica = await startServeReplica({
          home: join(dir, name),
          port: await freePort(),
          env,
          startMs: 120_000,
          yaml: [
            'upstreams:',
            '  legacy:',
            `    command: ${process.execPath}`,
            `    args: ["${fixture}", "--era", "legacy"]`,
            '    sandbox: none',
            '  files:',
            `    command: ${process.execPath}`,
            `    args: ["${filesystem}", "${dataDir}"]`,
            '    sandbox: none',
            'servers:',
            '  default:',
            '    upstreams: [legacy]',
            // /mcp/code: one run_code tool whose program's writes are confirmed first.
            '  code:',
            '    upstreams: [files]',
            '    tools: { mode: code }',
            'confirm:',
            '  servers: [code]',
            '  destructive: true',
            'redis:',
            '  url: redis://set-by-the-environment.invalid',
            `  prefix: "${prefix}"`,
            '',
          ],
        })
        replicas.push(replica)
      }
    },
    { timeout: 240_000 },
  )

  after(async () => {
    for (const r of replicas) r.child.kill('SIGKILL')
    await dropPostgresSchemas()
    rmSync(dir, { recursive: true, force: true })
  })

  const call = async (url: string, params: Json = {}): Promise<Json> => {
    const { status, final } = await postStatelessToolCall(`${url}/mcp`, {
      name: TOOL,
      params,
      capabilities: { elicitation: {} },
    })
    assert.ok(final, `no JSON-RPC response (HTTP ${status})`)
    return final
  }

  /** The first round on `url`: its one question's key and the sealed state. */
  async function firstRound(url: string): Promise<{ input: string; state: string }> {
    // The upstream connects in the background after start: wait for its catalog.
    const deadline = Date.now() + 60_000
    for (;;) {
      const reply = await call(url)
      const result = reply.result as Json | undefined
      if (result?.resultType === 'input_required') {
        const [input] = Object.keys(result.inputRequests as Json)
        return { input: input!, state: String(result.requestState) }
      }
      assert.ok(Date.now() < deadline, `no input_required from ${url}: ${JSON.stringify(reply)}`)
      await sleep(200)
    }
  }

  const resume = (url: string, round: { input: string; state: string }) =>
    call(url, { inputResponses: { [round.input]: ANSWER }, requestState: round.state })

  test('a retry sent to another replica resumes the call where it is held', async () => {
    const [a, b, c] = replicas as [(typeof replicas)[0], (typeof replicas)[0], (typeof replicas)[0]]
    for (const [first, second] of [
      [a, b],
      [b, c],
      [c, a],
    ] as const) {
      const round = await firstRound(first.url)
      const reply = await resume(second.url, round)
      assert.equal(reply.error, undefined, JSON.stringify(reply.error))
      const result = reply.result as { resultType: string; content: { text: string }[] }
      assert.equal(result.resultType, 'complete')
      // The answer given on the second replica reached the upstream call held on the first.
      assert.deepEqual(JSON.parse(result.content[0]!.text).answer, { ok: true })
      // Taken once: the same state again, anywhere, is refused.
      const again = await resume(second.url, round)
      assert.equal((again.error as Json | undefined)?.code, -32602, JSON.stringify(again))
    }
  })

  /** The first round on a WebSocket to `url`, as `firstRound` does over HTTP. */
  async function firstSocketRound(
    url: string,
    name = TOOL,
    meta: Json = {},
  ): Promise<{ input: string; state: string }> {
    const socket = await StatelessSocket.open(url)
    try {
      const deadline = Date.now() + 60_000
      for (;;) {
        const reply = await socket.call({ name, meta, capabilities: { elicitation: {} } })
        const result = reply.result as Json | undefined
        if (result?.resultType === 'input_required') {
          const [input] = Object.keys(result.inputRequests as Json)
          return { input: input!, state: String(result.requestState) }
        }
        assert.ok(Date.now() < deadline, `no input_required from ${url}: ${JSON.stringify(reply)}`)
        await sleep(200)
      }
    } finally {
      socket.close()
    }
  }

  const resumeOn = (
    socket: StatelessSocket,
    round: { input: string; state: string },
    more: { name?: string; meta?: Json } = {},
  ) =>
    socket.call({
      name: more.name ?? TOOL,
      params: { inputResponses: { [round.input]: ANSWER }, requestState: round.state },
      capabilities: { elicitation: {} },
      ...(more.meta ? { meta: more.meta } : {}),
    })

  test('a retry sent on a WebSocket to another replica is answered by the holder', async () => {
    const [a, b, c] = replicas as [(typeof replicas)[0], (typeof replicas)[0], (typeof replicas)[0]]
    for (const [first, second] of [
      [a, b],
      [b, c],
      [c, a],
    ] as const) {
      const round = await firstSocketRound(first.url)
      const socket = await StatelessSocket.open(second.url)
      try {
        const reply = await resumeOn(socket, round)
        assert.equal(reply.error, undefined, JSON.stringify(reply.error))
        const result = reply.result as { resultType: string; content: { text: string }[] }
        assert.equal(result.resultType, 'complete', JSON.stringify(reply))
        // The answer given on the second replica's socket reached the call held on the first.
        assert.deepEqual(JSON.parse(result.content[0]!.text).answer, { ok: true })
        // Taken once: the same state again, on this socket or over HTTP anywhere, is refused.
        const again = await resumeOn(socket, round)
        assert.equal((again.error as Json | undefined)?.code, -32602, JSON.stringify(again))
        const overHttp = await resume(first.url, round)
        assert.equal((overHttp.error as Json | undefined)?.code, -32602, JSON.stringify(overHttp))
        // The socket stayed where it was, and serves the next request there.
        assert.ok(socket.open)
        const next = await socket.call({ name: TOOL, capabilities: { elicitation: {} } })
        assert.equal((next.result as Json | undefined)?.resultType, 'input_required')
      } finally {
        socket.close()
      }
    }
  })

  test("the holder's progress reaches the WebSocket client before its result", async () => {
    const [a, c] = [replicas[0]!, replicas[2]!]
    // The upstream reports progress on a call that asked for it from its first round.
    const round = await firstSocketRound(a.url, 'test_progress_after_input', {
      progressToken: 'first',
    })
    const socket = await StatelessSocket.open(c.url)
    try {
      const reply = await resumeOn(socket, round, {
        name: 'test_progress_after_input',
        meta: { progressToken: 'relayed' },
      })
      const result = reply.result as { resultType: string; content: { text: string }[] }
      assert.equal(result?.resultType, 'complete', JSON.stringify(reply))
      assert.equal(result.content[0]!.text, 'finished')
      // Under the token the retry chose, on the socket the retry came on.
      const progress = socket.notes('relayed').map((n) => (n.params as Json).progress)
      assert.deepEqual(progress, [50, 100])
    } finally {
      socket.close()
    }
  })

  test('a program held for a confirmation on one replica resumes from another', async () => {
    const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]]
    const out = join(dataDir, 'confirmed.txt')
    // Lists first (no question), then writes (confirmed): the answer must reach this very run.
    const code = `const dirs = await files.list_allowed_directories({})
try { await files.write_file({ path: '${out}', content: 'confirmed' }); return 'written' }
catch (e) { return 'refused: ' + e.message }`
    const run = (url: string, params: Json = {}) =>
      postStatelessToolCall(`${url}/mcp/code`, {
        name: 'run_code',
        arguments: { code },
        params,
        capabilities: { elicitation: {} },
      })
    // The files upstream connects in the background after start: wait until the program can call it.
    const deadline = Date.now() + 60_000
    let round: Json
    for (;;) {
      const { status, final } = await run(a.url)
      const result = final?.result as Json | undefined
      if (result?.resultType === 'input_required') {
        round = result
        break
      }
      assert.ok(
        Date.now() < deadline,
        `no input_required (HTTP ${status}): ${JSON.stringify(final)}`,
      )
      await sleep(200)
    }
    const questions = Object.entries(round.inputRequests as Record<string, Json>)
    assert.equal(questions.length, 1, JSON.stringify(round))
    const [key, question] = questions[0]!
    assert.equal(question.method, 'elicitation/create')
    assert.match(String((question.params as Json).message), /"write_file"/)
    // Nothing is written while the program waits for the answer.
    assert.throws(() => readFileSync(out), /ENOENT/)
    const answered = {
      requestState: round.requestState,
      inputResponses: { [key]: { action: 'accept', content: {} } },
    }
    const { final } = await run(b.url, answered)
    assert.equal(final?.error, undefined, JSON.stringify(final))
    const result = final?.result as { resultType: string; content: { text: string }[] }
    assert.equal(result.resultType, 'complete', JSON.stringify(final))
    assert.equal(result.content.map((c) => c.text).join('\n'), '"written"')
    // The inner call ran on A's paused program, once, with B's answer.
    assert.equal(readFileSync(out, 'utf8'), 'confirmed')
    // Taken once: the same answer again, on either replica, is refused and writes nothing.
    rmSync(out)
    for (const url of [b.url, a.url]) {
      const again = (await run(url, answered)).final
      assert.equal((again?.error as Json | undefined)?.code, -32602, JSON.stringify(again))
    }
    assert.throws(() => readFileSync(out), /ENOENT/, 'the replay wrote nothing')
  })

  test('a retry for a call whose replica was killed gets a clear error at once', async () => {
    const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]]
    const round = await firstRound(a.url)
    const socketRound = await firstSocketRound(a.url)
    a.child.kill('SIGKILL')
    await new Promise((resolve) => a.child.once('exit', resolve))
    const started = Date.now()
    const reply = await resume(b.url, round)
    const elapsed = Date.now() - started
    const error = reply.error as Json | undefined
    assert.equal(error?.code, -32602, JSON.stringify(reply))
    assert.match(String(error?.message), /replica that has stopped; call again/)
    assert.ok(elapsed < 2000, `answered after ${elapsed} ms`)
    // The same on a WebSocket: a clear error at once, and the socket stays open.
    const socket = await StatelessSocket.open(b.url)
    try {
      const since = Date.now()
      const onSocket = await resumeOn(socket, socketRound)
      const took = Date.now() - since
      const socketError = onSocket.error as Json | undefined
      assert.equal(socketError?.code, -32602, JSON.stringify(onSocket))
      assert.match(String(socketError?.message), /replica that has stopped; call again/)
      assert.ok(took < 2000, `answered on the socket after ${took} ms`)
      assert.ok(socket.open)
    } finally {
      socket.close()
    }
    // The client starts over on a live replica, which holds the new call itself.
    const fresh = await firstRound(b.url)
    const done = await resume(b.url, fresh)
    assert.equal((done.result as Json | undefined)?.resultType, 'complete', JSON.stringify(done))
  })
})
