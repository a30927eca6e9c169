/**
 * The kill test (issue 19 point 3, issue 31 point 4, docs/decisions/058): three `barbican serve`
 * replicas on one PostgreSQL (pins, audit) and one Redis (sessions, bus, quotas), behind HAProxy
 * round-robin with no stickiness; 16 clients (8 legacy sessions on the official SDK v1, 8
 * stateless 2026-07-28) call a fixture tool that logs each execution; the replica holding one
 * legacy client's session is killed with SIGKILL under load. Every legacy client must be
 * calling again afterwards, on its session or, after a 404, on a new one. Counts are printed
 * for the closing note.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { createClient } from 'redis'
import {
  dropPostgresSchemas,
  FLEET_AUDIT_KEY,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { freePort, healthy, type ServeReplica, startServeReplica } from '../support/fleet.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

const root = join(import.meta.dirname, '../..')
const bin = join(root, 'bin/barbican.js')
const fixture = join(root, 'test/fixtures/fleet-upstream.ts')
const run = promisify(execFile)
/** The fleet-wide quota on `metered`: calls a minute across all replicas. */
const QUOTA = 10
const HAPROXY = ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'].find((p) =>
  existsSync(p),
)
const NAMES = ['a', 'b', 'c'] as const
type Name = (typeof NAMES)[number]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 90_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/**
 * Which replica (its URL) holds each legacy client's session, as the fleet's directory in Redis
 * says (docs/decisions/058: `session:<id>` names the replica, `replica:<id>` its address).
 */
async function sessionOwners(
  prefix: string,
  sessions: ReadonlyMap<number, () => string | undefined>,
): Promise<Map<number, string>> {
  const redis = createClient({ url: REDIS_URL })
  await redis.connect()
  try {
    const owners = new Map<number, string>()
    for (const [n, sessionId] of sessions) {
      const replica = await redis.get(`${prefix}session:${sessionId()}`)
      const url = replica === null ? null : await redis.get(`${prefix}replica:${replica}`)
      if (url !== null) owners.set(n, url)
    }
    return owners
  } finally {
    redis.destroy()
  }
}

interface Replica extends ServeReplica {
  readonly name: Name
}

/** One outcome per tools/call the load made. */
interface Attempt {
  readonly id: string
  readonly era: 'legacy' | 'modern'
  /** Which legacy client made it (0 to 7). */
  readonly client?: number
  readonly start: number
  readonly end: number
  readonly ok: boolean
  /** The legacy session was gone (404): the client initialized again and retried the id. */
  readonly sessionLost?: boolean
  readonly error?: string
}

// Three replicas start one after the other on a fresh PostgreSQL schema: slow on a busy machine.
describe('three replicas behind HAProxy, one killed under load', { timeout: 600_000 }, () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-fleet-')))
  const execLog = join(dir, 'executions.log')
  const description = join(dir, 'guarded.txt')
  const prefix = freshRedisPrefix()
  let env: NodeJS.ProcessEnv = {}
  const replicas = new Map<Name, Replica>()
  let balancer: ChildProcess | undefined
  let front = ''

  before(
    async () => {
      assert.ok(HAPROXY, 'HAProxy is needed (npm run setup installs it): apt-get install haproxy')
      env = {
        BARBICAN_POSTGRES_URL: await freshPostgresUrl(),
        BARBICAN_REDIS_URL: REDIS_URL,
        BARBICAN_AUDIT_KEY: FLEET_AUDIT_KEY,
      }
      writeFileSync(execLog, '')
      writeFileSync(description, 'Guarded, first version.')
      const ports = new Map<Name, number>()
      for (const name of NAMES) ports.set(name, await freePort())
      const frontPort = await freePort()
      for (const name of NAMES) {
        // One at a time: the first sees the server first and pins it; the others agree.
        const replica = await startServeReplica({
          home: join(dir, name),
          port: ports.get(name)!,
          env,
          startMs: 90_000,
          yaml: [
            'upstreams:',
            '  fleet:',
            `    command: ${process.execPath}`,
            `    args: ["${fixture}", "${execLog}", "${description}"]`,
            '    sandbox: none',
            'redis:',
            '  url: redis://set-by-the-environment.invalid',
            `  prefix: "${prefix}"`,
            'audit:',
            '  rawArguments: true',
            'rateLimits:',
            '  fleet-quota:',
            '    per: [subject]',
            '    tools: [metered]',
            '    algorithm: fixed-window',
            `    limit: ${QUOTA}`,
            '    windowMs: 60000',
            'limits:',
            '  maxSessionsPerIdentity: 1000',
            '',
          ],
        })
        replicas.set(name, { name, ...replica })
        await directCall(replica.url, 'announce', {})
      }
      const haproxyConfig = join(dir, 'haproxy.cfg')
      writeFileSync(
        haproxyConfig,
        [
          'global',
          '  maxconn 2000',
          'defaults',
          '  mode http',
          '  timeout connect 1s',
          '  timeout client 60s',
          '  timeout server 60s',
          '  retries 2',
          '  option redispatch',
          'frontend mcp',
          `  bind 127.0.0.1:${frontPort}`,
          '  default_backend replicas',
          'backend replicas',
          '  balance roundrobin',
          ...NAMES.map(
            (n) => `  server ${n} 127.0.0.1:${ports.get(n)} check inter 300 fall 1 rise 2`,
          ),
          '',
        ].join('\n'),
      )
      balancer = spawn(HAPROXY, ['-f', haproxyConfig, '-db'], { stdio: 'ignore' })
      front = `http://127.0.0.1:${frontPort}`
      await until('HAProxy', () => healthy(front))
    },
    { timeout: 300_000 },
  )

  after(async () => {
    balancer?.kill('SIGKILL')
    for (const r of replicas.values()) r.child.kill('SIGTERM')
    await sleep(500)
    for (const r of replicas.values()) r.child.kill('SIGKILL')
    await dropPostgresSchemas()
  })

  async function directCall(url: string, name: string, args: Record<string, unknown>) {
    const client = new Client({ name: 'fleet-direct', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
    try {
      return await client.callTool({ name, arguments: args })
    } finally {
      await client.close()
    }
  }

  test('a list_changed from one replica’s upstream reaches clients of every replica', async () => {
    const heard = new Map<Name, number>()
    const clients: Client[] = []
    for (const r of replicas.values()) {
      const client = new Client({ name: `listener-${r.name}`, version: '1.0.0' })
      client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
        heard.set(r.name, (heard.get(r.name) ?? 0) + 1)
      })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${r.url}/mcp`)))
      await client.listTools()
      clients.push(client)
    }
    await sleep(300) // the SDK opens its GET stream after initialize
    const a = clients[0]!
    await a.callTool({ name: 'announce', arguments: {} })
    await until('list_changed on every replica', () => heard.size === 3, 3000)
    for (const c of clients) await c.close()
  })

  test('a pin approved through one replica is enforced on the others within 1 s', async () => {
    writeFileSync(description, 'Guarded, second version: now it also does something else.')
    const [a, b, c] = NAMES.map((n) => replicas.get(n)!)
    await directCall(a!.url, 'announce', {})
    // Every replica lists again; the drifted tool is held back everywhere.
    const refused = async (r: Replica) => {
      const reply = await directCall(r.url, 'guarded', {}).catch((err: Error) => err)
      return reply instanceof Error || reply.isError === true
    }
    await until(
      'the drift quarantined on b and c',
      async () => (await refused(b!)) && (await refused(c!)),
      10_000,
    )
    const { stderr } = await run(
      process.execPath,
      [bin, 'pins', 'approve', '--config', a!.config, 'fleet', '--all'],
      { timeout: 30_000, env: { ...process.env, ...env } },
    ).catch((err: { stderr: string }) => ({ stderr: err.stderr }))
    const approvedAt = Date.now()
    for (const r of [b!, c!]) {
      await until(
        `the approval enforced on ${r.name}`,
        async () => !(await refused(r)),
        1000,
      ).catch((err: Error) =>
        assert.fail(`${err.message} (${Date.now() - approvedAt} ms; ${stderr})`),
      )
    }
  })

  test(`a quota of ${QUOTA} a minute admits ${QUOTA} calls across the three replicas`, async () => {
    const outcomes: string[] = []
    for (let i = 0; i < QUOTA * 3; i++) {
      const reply = await postStatelessToolCall(`${front}/mcp`, { name: 'metered', id: i + 1 })
      const error = reply.final?.error as { data?: { barbicanCode?: string } } | undefined
      outcomes.push(
        error ? String(error.data?.barbicanCode) : reply.final?.result ? 'ok' : reply.text,
      )
    }
    const admitted = outcomes.filter((o) => o === 'ok').length
    console.log(`fleet quota: ${admitted} of ${outcomes.length} admitted (limit ${QUOTA})`)
    assert.equal(admitted, QUOTA, outcomes.join(', '))
    assert.ok(
      outcomes.slice(QUOTA).every((o) => o === 'ERR_RATE_LIMITED'),
      outcomes.join(', '),
    )
  })

  test('kill -9 under load: only in-flight calls fail, none runs twice, each has one record', async () => {
    const attempts: Attempt[] = []
    let stop = false
    let seq = 0
    const nextId = (who: string) => `${who}-${seq++}`
    /** Each legacy client's session now (its id), for finding which replica holds it. */
    const sessions = new Map<number, () => string | undefined>()

    const connect = async (n: number) => {
      const client = new Client({ name: `legacy-${n}`, version: '1.0.0' })
      const transport = new StreamableHTTPClientTransport(new URL(`${front}/mcp`))
      await client.connect(transport)
      sessions.set(n, () => transport.sessionId)
      return client
    }
    const call = async (client: Client, id: string) => {
      const reply = await client.callTool({ name: 'work', arguments: { id, ms: 20 } })
      return (reply.content as { text: string }[])[0]?.text === id
    }
    // What an application on the official SDK v1 does: the SDK does not start a new session by
    // itself; it throws StreamableHTTPError with code 404, on which the specification tells the
    // client to initialize again. Any other failure leaves the session as it is (the SDK keeps
    // its session id), so the client goes on calling on it.
    const legacy = async (n: number) => {
      let client: Client | undefined
      while (!stop) {
        if (!client) {
          try {
            client = await connect(n)
          } catch {
            await sleep(20)
            continue
          }
        }
        const id = nextId(`L${n}`)
        const start = Date.now()
        try {
          const ok = await call(client, id)
          attempts.push({ id, era: 'legacy', client: n, start, end: Date.now(), ok })
        } catch (err) {
          const message = String((err as Error).message)
          if (!(err instanceof StreamableHTTPError && err.code === 404)) {
            attempts.push({
              id,
              era: 'legacy',
              client: n,
              start,
              end: Date.now(),
              ok: false,
              error: message,
            })
            continue
          }
          // The session is gone, and the 404 says the call never ran: a new session, and the
          // same call again.
          await client.close().catch(() => {})
          client = undefined
          try {
            client = await connect(n)
            const ok = await call(client, id)
            attempts.push({
              id,
              era: 'legacy',
              client: n,
              start,
              end: Date.now(),
              ok,
              sessionLost: true,
            })
          } catch (again) {
            attempts.push({
              id,
              era: 'legacy',
              client: n,
              start,
              end: Date.now(),
              ok: false,
              sessionLost: true,
              error: String(again),
            })
          }
        }
      }
      await client?.close().catch(() => {})
    }

    const modern = async (n: number) => {
      while (!stop) {
        const id = nextId(`M${n}`)
        const start = Date.now()
        try {
          const reply = await postStatelessToolCall(`${front}/mcp`, {
            name: 'work',
            arguments: { id, ms: 20 },
          })
          const result = reply.final?.result as { content?: { text: string }[] } | undefined
          const ok = reply.status === 200 && result?.content?.[0]?.text === id
          attempts.push({
            id,
            era: 'modern',
            start,
            end: Date.now(),
            ok,
            ...(ok ? {} : { error: reply.text.slice(0, 200) }),
          })
        } catch (err) {
          attempts.push({
            id,
            era: 'modern',
            start,
            end: Date.now(),
            ok: false,
            error: String(err),
          })
        }
      }
    }

    const load = [
      ...Array.from({ length: 8 }, (_, i) => legacy(i)),
      ...Array.from({ length: 8 }, (_, i) => modern(i)),
    ]
    await sleep(3000)
    // The victim is the replica holding legacy client 0's session, so that at least one
    // session dies with it; which clients' sessions it holds is read from the fleet's directory.
    const owners = await sessionOwners(prefix, sessions)
    const victim = [...replicas.values()].find((r) => r.url === owners.get(0))
    assert.ok(victim, `the replica holding client 0's session: ${JSON.stringify([...owners])}`)
    const held = new Set([...owners].filter(([, url]) => url === victim.url).map(([n]) => n))
    // SIGKILL is not instant: until the process is reaped, its kernel sockets still accept
    // connections (and reset them as it dies). A call sent before it is gone may be in flight.
    const exited = once(victim.child, 'exit')
    const killedAt = Date.now()
    victim.child.kill('SIGKILL')
    await exited
    const goneAt = Date.now()
    await sleep(3000)
    stop = true
    await Promise.all(load)

    const executions = new Map<string, number>()
    for (const line of readFileSync(execLog, 'utf8').split('\n')) {
      if (line) executions.set(line, (executions.get(line) ?? 0) + 1)
    }
    // One audit log in PostgreSQL for the whole fleet, the victim's records included.
    const records = new Map<string, number>()
    const { stdout } = await run(
      process.execPath,
      [bin, 'audit', 'query', '--config', replicas.get('a')!.config, '--tool', 'work'],
      { timeout: 60_000, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, ...env } },
    )
    for (const line of stdout.split('\n')) {
      if (!line) continue
      const record = JSON.parse(line) as { outcome?: string; args?: { id?: string } }
      const id = record.args?.id
      if (record.outcome === 'ok' && typeof id === 'string')
        records.set(id, (records.get(id) ?? 0) + 1)
    }
    // One key for the whole fleet (ADR 117): the chain verifies across every replica's records,
    // the victim's too (those after its last checkpoint are only unproven: it never stopped).
    const verified = await run(
      process.execPath,
      [bin, 'audit', 'verify', '--config', replicas.get('a')!.config],
      { timeout: 60_000, env: { ...process.env, ...env } },
    ).catch((err: { code: number; stdout: string; stderr: string }) => err)
    assert.equal('code' in verified ? verified.code : 0, 0, `${verified.stdout}${verified.stderr}`)
    const succeeded = attempts.filter((a) => a.ok)
    const failed = attempts.filter((a) => !a.ok)
    const duplicates = [...executions].filter(([, n]) => n > 1).map(([id]) => id)
    const missingRecords = succeeded.filter((a) => records.get(a.id) !== 1).map((a) => a.id)
    const missingExecutions = succeeded.filter((a) => executions.get(a.id) !== 1).map((a) => a.id)
    // In flight at the kill: sent before it, answered after. Anything sent later must succeed,
    // on the same session or, after a 404, on a new one.
    const notInFlight = failed.filter((a) => !(a.start <= goneAt && a.end >= killedAt))
    const counts = {
      dyingMs: goneAt - killedAt,
      requests: attempts.length,
      succeeded: succeeded.length,
      failures: failed.length,
      failuresInFlightAtKill: failed.length - notInFlight.length,
      sessionsLostAndReinitialized: attempts.filter((a) => a.sessionLost).length,
      duplicates: duplicates.length,
      missingRecords: missingRecords.length,
      missingExecutions: missingExecutions.length,
      legacy: attempts.filter((a) => a.era === 'legacy').length,
      modern: attempts.filter((a) => a.era === 'modern').length,
    }
    console.log(`fleet kill test: ${JSON.stringify(counts)}`)
    // Each legacy client after the kill, in order: ok, failed (in flight), 404 then ok again.
    const story = (n: number) =>
      attempts
        .filter((a) => a.client === n && a.end >= killedAt)
        .map((a) => (a.ok ? (a.sessionLost ? 'ok after 404' : 'ok') : a.error))
        .filter((what, i, all) => i === 0 || what !== all[i - 1])
    for (let n = 0; n < 8; n++) {
      const on = held.has(n) ? 'the victim' : 'a survivor'
      console.log(`legacy client ${n}, session on ${on}: ${story(n).join(' → ')}`)
    }
    assert.ok(succeeded.length > 40, `enough load: ${JSON.stringify(counts)}`)
    assert.ok(counts.legacy > 10 && counts.modern > 10, 'both eras under load')
    assert.deepEqual(notInFlight.slice(0, 5), [], 'only calls in flight at the kill fail')
    for (let n = 0; n < 8; n++) {
      const mine = attempts.filter((a) => a.client === n)
      const reinitialized = mine.filter((a) => a.sessionLost)
      if (held.has(n)) {
        // Its session died with the victim: one 404, one new session, the call retried there.
        assert.equal(reinitialized.length, 1, `client ${n}: ${story(n).join(' → ')}`)
        assert.ok(reinitialized[0]!.ok, `client ${n} re-initialized: ${story(n).join(' → ')}`)
      } else {
        assert.deepEqual(reinitialized, [], `client ${n} keeps its session on a survivor`)
      }
      assert.ok(mine.at(-1)?.ok, `client ${n} is calling again: ${story(n).join(' → ')}`)
    }
    assert.ok(failed.length <= 16, `at most the calls in flight: ${JSON.stringify(counts)}`)
    assert.deepEqual(
      duplicates.map((id) => attempts.filter((a) => a.id === id)),
      [],
      'no call executed twice upstream',
    )
    assert.deepEqual(missingExecutions, [], 'every successful reply executed exactly once')
    assert.deepEqual(missingRecords, [], 'every successful reply has exactly one audit record')
  })
})
