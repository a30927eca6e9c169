/**
 * Held calls keep who they are for. A 2026-07-28 call to a legacy upstream that asks the client
 * something is held by Barbican between the client's rounds (src/bridge/held-call.ts); with auth
 * on, the held call still carries its caller end to end, so the upstream's context and
 * assertion name the real caller. The sealed `requestState` that resumes it is refused when an
 * attacker presents it under another identity, after it expired, or tampered with; each case is
 * played over HTTP with API keys, as an attacker holding a victim's state would.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

type Json = Record<string, unknown>

const fixture = fileURLToPath(new URL('../fixtures/bridge-upstream.ts', import.meta.url))
/** Short, so that the expiry case runs in about a second; the other cases finish well within. */
const HELD_MS = 1000
const TOOL = 'test_report_meta_after_input'
const ANSWER = { action: 'accept', content: { ok: true } }

describe('held 2026-07-28 calls with auth on', () => {
  let server: RunningServer
  const alice = generateApiKey()
  const mallory = generateApiKey()

  before(async () => {
    const config = {
      listen: '127.0.0.1:0',
      limits: { heldCallTimeoutMs: HELD_MS },
      upstreams: { legacy: { command: process.execPath, args: [fixture, '--era', 'legacy'] } },
      auth: {
        apiKeys: {
          keys: [
            { id: 'alice-laptop', hash: alice.hash, subject: 'alice', tenant: 'acme' },
            { id: 'mallory', hash: mallory.hash, subject: 'mallory', tenant: 'acme' },
          ],
        },
      },
    }
    server = await startServer(
      parseConfigText(JSON.stringify(config), { json: true }).config,
      silentLogger,
    )
  })
  after(async () => {
    await server?.stop()
  })

  /** One stateless 2026-07-28 tools/call of TOOL as `key`; returns the JSON-RPC response. */
  async function call(key: string, extra: Json = {}): Promise<Json> {
    const { status, final } = await postStatelessToolCall(`${server.url}/mcp`, {
      name: TOOL,
      params: extra,
      capabilities: { elicitation: {} },
      headers: { authorization: `Bearer ${key}` },
    })
    assert.ok(final, `no response (HTTP ${status})`)
    return final
  }

  /** Starts a held call as `key`: the round's one input key and the sealed state. */
  async function firstRound(key: string): Promise<{ input: string; state: string }> {
    const reply = await call(key)
    assert.equal(reply.error, undefined, JSON.stringify(reply.error))
    const result = reply.result as Json
    assert.equal(result.resultType, 'input_required')
    const inputs = Object.entries(result.inputRequests as Record<string, Json>)
    assert.equal(inputs.length, 1)
    assert.equal(inputs[0]![1].method, 'elicitation/create')
    assert.match(String(result.requestState), /^b1\./)
    return { input: inputs[0]![0], state: String(result.requestState) }
  }

  const resume = (key: string, round: { input: string; state: string }) =>
    call(key, { inputResponses: { [round.input]: ANSWER }, requestState: round.state })

  /** The completed call's report: the answer the upstream got and the `_meta` it received. */
  function reportOf(reply: Json): { answer: Json; meta: Json } {
    assert.equal(reply.error, undefined, JSON.stringify(reply.error))
    const result = reply.result as { resultType: string; content: { text: string }[] }
    assert.equal(result.resultType, 'complete')
    return JSON.parse(result.content[0]!.text) as { answer: Json; meta: Json }
  }

  test('completes for its caller, and the upstream learns who the call is for', async () => {
    const round = await firstRound(alice.key)
    const { answer, meta } = reportOf(await resume(alice.key, round))
    assert.deepEqual(answer, { ok: true })
    const context = meta['dev.barbican/context'] as Json
    assert.equal(context.user, 'alice', 'the held call kept its caller (not anonymous)')
    assert.equal(context.tenant, 'acme')
    assert.equal(context.client, 'api-key:alice-laptop')
    const jwks = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`))
    const { payload } = await jwtVerify(String(context.assertion), jwks, {
      issuer: server.url,
      audience: 'urn:barbican:upstream:legacy',
      typ: 'obo+jwt',
    })
    assert.equal(payload.sub, 'alice')
  })

  test("another identity presenting the state is refused, and the call stays its owner's", async () => {
    const round = await firstRound(alice.key)
    const stolen = await resume(mallory.key, round)
    assert.equal((stolen.error as Json | undefined)?.code, -32602, JSON.stringify(stolen))
    assert.match(String((stolen.error as Json).message), /requestState is invalid/)
    assert.equal(stolen.result, undefined)
    const { meta } = reportOf(await resume(alice.key, round))
    assert.equal((meta['dev.barbican/context'] as Json).user, 'alice')
  })

  test('a tampered state is refused', async () => {
    const round = await firstRound(alice.key)
    // Flip one bit of the sealed body (past the version and the nonce).
    const body = Buffer.from(round.state.slice(3), 'base64url')
    body[body.length - 1]! ^= 1
    const reply = await resume(alice.key, { ...round, state: `b1.${body.toString('base64url')}` })
    assert.equal((reply.error as Json | undefined)?.code, -32602, JSON.stringify(reply))
    assert.match(String((reply.error as Json).message), /requestState is invalid/)
    const forged = await resume(alice.key, { ...round, state: 'b1.AAAA' })
    assert.equal((forged.error as Json | undefined)?.code, -32602, JSON.stringify(forged))
  })

  test('an expired state is refused, even to its owner', async () => {
    const round = await firstRound(alice.key)
    await sleep(HELD_MS + 200)
    const reply = await resume(alice.key, round)
    assert.equal((reply.error as Json | undefined)?.code, -32602, JSON.stringify(reply))
    assert.match(String((reply.error as Json).message), /expired/)
  })
})
