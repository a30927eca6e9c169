import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { callOf, countingRelay } from '../../test/support/calls.ts'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import { BarbicanError } from '../common/errors.ts'
import { normalizeConfig } from '../config/normalize.ts'
import type { CallPeer, Policy } from '../policies/policy.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import { NO_BACKENDS } from './backends.ts'
import { Gateway } from './gateway.ts'
import { planFromConfig } from './plan.ts'
import { PolicyState } from './policy-state.ts'
import { applyDiff, authAfter, diffConfigs, isEmptyDiff, policyFilesOf } from './reload.ts'

const stdio = (command: string) => ({ command, args: [] })

/** The policy chain `config` builds, keeping across builds what `kept` holds (as a reload does). */
function policiesKeeping(kept: PolicyState, config: Record<string, unknown>) {
  return (
    planFromConfig(
      normalizeConfig(config),
      silentLogger,
      undefined,
      NO_BACKENDS,
      undefined,
      undefined,
      kept,
    ).policies ?? []
  )
}
describe('diffConfigs', () => {
  const running = normalizeConfig({
    upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
    servers: { default: {}, ops: { upstreams: ['a'] } },
  })

  test('finds nothing between equal configurations', () => {
    const same = normalizeConfig({
      upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
      servers: { default: {}, ops: { upstreams: ['a'] } },
    })
    assert.ok(isEmptyDiff(diffConfigs(running, same)))
  })

  test('names added, removed and changed upstreams and the servers they change', () => {
    const next = normalizeConfig({
      upstreams: { a: stdio('a'), b: stdio('b2'), d: stdio('d') },
      servers: { default: {}, ops: { upstreams: ['a'], tools: { exclude: ['x*'] } } },
    })
    const diff = diffConfigs(running, next)
    assert.deepEqual(diff.upstreams, { added: ['d'], removed: ['c'], changed: ['b'] })
    // default lists every upstream, so its members changed; ops changed its filter.
    assert.deepEqual(diff.servers, ['default', 'ops'])
    assert.deepEqual(diff.needsRestart, [])
  })

  test('reports what only a restart applies: listen, limits, auth, new or moved servers', () => {
    const next = normalizeConfig({
      listen: '127.0.0.1:7411',
      limits: { maxBodyBytes: 1234 },
      upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
      servers: { default: {}, extra: { upstreams: ['b'] } },
    })
    const diff = diffConfigs(running, next)
    assert.deepEqual(diff.needsRestart, [
      'listen',
      'limits',
      'servers.extra (added)',
      'servers.ops (removed)',
    ])
    assert.deepEqual(diff.servers, [])
  })

  test('names changed policy sections as applied, not as needing a restart', () => {
    const next = normalizeConfig({
      upstreams: { a: stdio('a'), b: stdio('b'), c: stdio('c') },
      servers: { default: {}, ops: { upstreams: ['a'] } },
      rateLimits: { few: { limit: 1, windowMs: 1000 } },
      guards: { arguments: 'enforce' },
    })
    const diff = diffConfigs(running, next)
    assert.deepEqual(diff.policies, ['rateLimits', 'guards'])
    assert.deepEqual(diff.needsRestart, [])
    assert.ok(!isEmptyDiff(diff))
  })

  test('auth.permissions apply on a reload; the rest of auth still needs a restart', () => {
    const withAuth = (subjects: string[], keys: unknown[] = []) =>
      normalizeConfig({
        upstreams: { a: stdio('a') },
        auth: { apiKeys: { keys }, permissions: [{ subjects }] },
      })
    const start = withAuth(['ann'])
    const revoked = diffConfigs(start, withAuth(['bob']))
    assert.deepEqual(revoked.policies, ['auth.permissions'])
    assert.deepEqual(revoked.needsRestart, [])
    const both = diffConfigs(
      start,
      withAuth(['bob'], [{ id: 'k', hash: `sha256:${'0'.repeat(64)}`, subject: 's' }]),
    )
    assert.deepEqual(both.policies, ['auth.permissions'])
    assert.deepEqual(both.needsRestart, ['auth'])
    assert.deepEqual(authAfter(start, withAuth(['bob']))?.permissions?.[0]?.subjects, ['bob'])
    // Auth added by the reload needs a restart, its permissions with it.
    const added = diffConfigs(normalizeConfig({ upstreams: { a: stdio('a') } }), start)
    assert.deepEqual(added.policies, [])
    assert.deepEqual(added.needsRestart, ['auth'])
  })

  test('an edited Cedar file changes the policies though the configuration did not', () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-reload-cedar-'))
    const file = join(dir, 'p.cedar')
    writeFileSync(file, 'permit(principal, action, resource);\n')
    const withCedar = normalizeConfig({
      upstreams: { a: stdio('a') },
      cedar: { policies: [file] },
    })
    const before = policyFilesOf(withCedar)
    assert.deepEqual(
      diffConfigs(withCedar, withCedar, { running: before, next: before }).policies,
      [],
    )
    writeFileSync(file, 'forbid(principal, action, resource);\n')
    const after = policyFilesOf(withCedar)
    assert.notDeepEqual(after, before)
    assert.deepEqual(diffConfigs(withCedar, withCedar, { running: before, next: after }).policies, [
      'cedar (policy files)',
    ])
    assert.equal(policyFilesOf(running), undefined)
  })

  test("a tenant's own policy sections apply; any other change to tenants needs a restart", () => {
    const withTenants = (acme: Record<string, unknown>, more: Record<string, unknown> = {}) =>
      normalizeConfig({
        upstreams: { a: stdio('a') },
        auth: { apiKeys: { keys: [] } },
        tenants: {
          acme: { upstreams: { a: stdio('a') }, ...acme },
          globex: { upstreams: { g: stdio('g') } },
          ...more,
        },
      })
    const base = withTenants({})
    const policies = diffConfigs(
      base,
      withTenants({
        cedar: { policies: ['acme.cedar'] },
        rateLimits: { all: { limit: 1, windowMs: 1000 } },
      }),
    )
    assert.deepEqual(policies.policies, ['tenants.acme.rateLimits', 'tenants.acme.cedar'])
    assert.deepEqual(policies.needsRestart, [])
    // A tenant's upstreams, or a tenant added, still need a restart; its policies then wait too.
    const upstreams = diffConfigs(
      base,
      withTenants({ upstreams: { a: stdio('a2') }, guards: { arguments: 'enforce' } }),
    )
    assert.deepEqual(upstreams.needsRestart, ['tenants'])
    assert.deepEqual(upstreams.policies, [])
    assert.deepEqual(
      diffConfigs(base, withTenants({}, { initech: { upstreams: { i: stdio('i') } } }))
        .needsRestart,
      ['tenants'],
    )
  })

  test("an edited tenant's Cedar file swaps that tenant's chain only", () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-reload-tenant-cedar-'))
    const file = join(dir, 'acme.cedar')
    writeFileSync(file, 'permit(principal, action, resource);\n')
    const config = normalizeConfig({
      upstreams: { a: stdio('a') },
      tenants: { acme: { upstreams: { a: stdio('a') }, cedar: { policies: [file] } } },
    })
    const before = policyFilesOf(config)
    writeFileSync(file, 'forbid(principal, action, resource);\n')
    const after = policyFilesOf(config, config)
    assert.deepEqual(diffConfigs(config, config, { running: before, next: after }).policies, [
      'tenants.acme.cedar (policy files)',
    ])
  })
})

/** An upstream with `echo` and `slow`, which answers once `release` is called. */
function echoServer(gate: { release?: () => void }): McpServer {
  const server = new McpServer({ name: 'tools', version: '1.0.0' })
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }))
  server.registerTool('slow', {}, async () => {
    await new Promise<void>((resolve) => {
      gate.release = resolve
    })
    return { content: [{ type: 'text', text: 'done' }] }
  })
  return server
}

/** A policy refusing calls of `tool` (as a Cedar forbid or a permission would). */
function denying(tool: string): Policy {
  return {
    name: 'authorize',
    async handle(call, next) {
      if (call.request.params?.name === tool) {
        throw new BarbicanError('ERR_POLICY_DENIED', `"${tool}" is denied`)
      }
      return await next(call)
    },
  }
}

const config = normalizeConfig({ upstreams: { tools: stdio('tools') } })
const policyDiff = (...policies: string[]) => ({
  upstreams: { added: [], removed: [], changed: [] },
  servers: [],
  policies,
  needsRestart: [],
})

describe('applyDiff swaps the policy chain under open sessions', () => {
  let gateway: Gateway
  let client: Client
  const gate: { release?: () => void } = {}
  let closed = 0
  /** The chain at start: passes everything, counts the calls it sees, says when it is closed. */
  let seen = 0
  const starting: Policy = {
    name: 'guards',
    async handle(call, next) {
      if (call.request.method === 'tools/call') seen++
      return await next(call)
    },
    close() {
      closed++
    },
  }

  before(async () => {
    gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('tools', () => echoServer(gate))],
        servers: [serverPlan('default', ['tools'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
        policies: [starting],
      },
      silentLogger,
    )
    await gateway.start()
    const [clientSide, gatewaySide] = memoryPair()
    gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
    await gatewaySide.start()
    client = new Client({ name: 'reload', version: '1.0.0' })
    await client.connect(clientSide as never)
  })

  after(async () => {
    await client?.close()
    await gateway?.stop()
  })

  test('the next call of an open session is refused; the call in flight ends on its own chain', async () => {
    const ok = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
    assert.ok(!ok.isError)
    const inFlight = client.callTool({ name: 'slow', arguments: {} })
    while (gate.release === undefined) await new Promise((r) => setTimeout(r, 5))
    const plan = { upstreams: [], servers: [], clientRequestTimeoutMs: 5_000 }
    await applyDiff(
      gateway,
      { ...plan, policies: [denying('slow'), denying('echo')] },
      config,
      policyDiff('cedar'),
    )
    await assert.rejects(
      client.callTool({ name: 'echo', arguments: { text: 'again' } }),
      (err: { code?: number; message?: string }) =>
        err.code === -32001 && /"echo" is denied/.test(err.message ?? ''),
    )
    // The replaced chain is closed only once its last call has ended.
    assert.equal(closed, 0)
    gate.release()
    const done = await inFlight
    assert.ok(!done.isError)
    await new Promise((r) => setImmediate(r))
    assert.equal(closed, 1)
    assert.equal(seen, 2, 'the first chain saw echo and slow, not the call after the swap')
  })

  test('a diff without policy changes keeps the running chain', async () => {
    const before = gateway.policies
    await applyDiff(
      gateway,
      { upstreams: [], servers: [], clientRequestTimeoutMs: 5_000, policies: [] },
      config,
      policyDiff(),
    )
    assert.equal(gateway.policies, before)
  })
})

describe("a rebuilt chain keeps its policies' state", () => {
  test('quota counters carry over: a lowered limit counts the calls already taken', async () => {
    const kept = new PolicyState()
    const chainOf = (limit: number) =>
      policiesKeeping(kept, {
        upstreams: { tools: stdio('tools') },
        rateLimits: { few: { per: ['subject'], limit, windowMs: 60_000 } },
      })
    const gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('tools', () => echoServer({}))],
        servers: [serverPlan('default', ['tools'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
        policies: chainOf(5),
      },
      silentLogger,
    )
    await gateway.start()
    const [clientSide, gatewaySide] = memoryPair()
    gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
    await gatewaySide.start()
    const client = new Client({ name: 'quota', version: '1.0.0' })
    try {
      await client.connect(clientSide as never)
      const echo = () => client.callTool({ name: 'echo', arguments: { text: 'x' } })
      for (let i = 0; i < 3; i++) assert.ok(!(await echo()).isError)
      await applyDiff(
        gateway,
        { upstreams: [], servers: [], clientRequestTimeoutMs: 5_000, policies: chainOf(4) },
        config,
        policyDiff('rateLimits'),
      )
      assert.ok(!(await echo()).isError, 'the fourth call of four')
      await assert.rejects(echo(), (err: { code?: number }) => err.code === -32029)
    } finally {
      await client.close()
      await gateway.stop()
    }
  })
})

describe('a rebuilt confirm policy keeps its questions and its labels', () => {
  const kept = new PolicyState()
  const confirmOf = (extra: Record<string, unknown>) => {
    const policies = policiesKeeping(kept, {
      upstreams: { mail: stdio('mail'), web: stdio('web') },
      confirm: { tools: ['*__delete'] },
      contexts: {
        labels: {
          private: { upstreams: ['mail'] },
          untrusted: { upstreams: ['web'] },
          egress: { tools: ['mail__send'] },
        },
      },
      ...extra,
    })
    return policies.find((p) => p.name === 'confirm')!
  }
  const modern: CallPeer = {
    era: 'modern',
    capabilities: { elicitation: {} },
    sessionId: undefined,
    ask: () => Promise.reject(new Error('never asked')),
  }
  const callTo = (upstream: string, name: string, params: Record<string, unknown> = {}) => ({
    ...callOf('tools/call', { name, arguments: {}, ...params }),
    route: { kind: 'unicast', upstream, original: name } as const,
    peer: modern,
    decisions: [],
  })

  test('a question asked before a reload is answered after it, once', async () => {
    const { relay, calls } = countingRelay()
    const question = await confirmOf({}).handle(callTo('mail', 'mail__delete'), relay)
    assert.equal(question.kind === 'result' && question.resultType, 'input_required')
    const requestState = question.kind === 'result' ? question.result.requestState : undefined
    const answer = {
      requestState,
      inputResponses: { 'barbican-confirm': { action: 'accept', content: {} } },
    }
    // A reload rebuilt the chain (guards added) while the client was answering.
    const after = confirmOf({ guards: { arguments: 'enforce' } })
    const done = await after.handle(callTo('mail', 'mail__delete', answer), relay)
    assert.equal(done.kind === 'result' && done.resultType, 'complete')
    assert.equal(calls.length, 1)
    await assert.rejects(
      after.handle(callTo('mail', 'mail__delete', answer), relay),
      /already answered/,
    )
  })

  test('labels that entered a context before a reload still stop the trifecta', async () => {
    const { relay } = countingRelay()
    const before = confirmOf({})
    await before.handle(callTo('mail', 'mail__read'), relay)
    await before.handle(callTo('web', 'web__fetch'), relay)
    await assert.rejects(
      confirmOf({}).handle(callTo('mail', 'mail__send'), relay),
      /trifecta|private data/,
    )
  })
})
