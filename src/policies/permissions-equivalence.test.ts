/**
 * ADR 046: `auth.permissions` keep their meaning when Cedar is configured. Over a table of
 * callers, servers and items, a chain with Cedar policies that permit everything decides exactly
 * as `authorize` alone (same allow/deny, same deciding rule), a Cedar forbid only narrows, and
 * `judgePermission` (what `barbican policy explain` prints) agrees with the policy.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { rules } from '../../test/support/plans.ts'
import type { Identity } from '../auth/identity.ts'
import { buildCatalog } from '../catalog/catalog.ts'
import type { Request } from '../protocol/model.ts'
import { silentLogger } from '../telemetry/log.ts'
import type { Route } from '../virtual-servers/route.ts'
import { authorize, judgePermission, type PermissionRule } from './authorize.ts'
import { cedarPolicy } from './cedar.ts'
import { CedarEngine, readPolicyFiles } from './cedar-engine.ts'
import { compose } from './chain.ts'
import type { Call, Policy, Reply } from './policy.ts'

const RULES: PermissionRule[] = [
  { subjects: ['alice'], servers: ['*'] },
  { tenants: ['acme'], scopes: ['mcp:tools'], servers: ['default'], tools: ['files__read*'] },
  { claims: { groups: 'eng' }, servers: ['default', 'ops-*'], tools: ['gh__*', 'files__list'] },
  { subjects: ['carol'], servers: ['default'], prompts: ['brief'] },
]

const who: Record<string, Identity> = {
  alice: { subject: 'alice', scopes: [], method: 'api-key' },
  acme: { subject: 'dan', tenant: 'acme', scopes: ['mcp:tools'], method: 'jwt' },
  acmeNoScope: { subject: 'erin', tenant: 'acme', scopes: [], method: 'jwt' },
  eng: { subject: 'frank', scopes: [], method: 'jwt', claims: { groups: ['eng', 'ops'] } },
  carol: { subject: 'carol', scopes: [], method: 'api-key' },
  stranger: { subject: 'mallory', scopes: [], method: 'anonymous' },
}
const SERVERS = ['default', 'ops-eu', 'lab']
const TOOLS = ['files__read', 'files__read_dir', 'files__write', 'files__list', 'gh__issue']

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'barbican-equivalence-')), 'p.cedar')
  writeFileSync(path, text)
  return path
}

function toolCall(identity: Identity, server: string, tool: string): Call {
  const route: Route = {
    kind: 'unicast',
    upstream: tool.split('__')[0]!,
    original: tool.split('__')[1]!,
    catalog: EMPTY,
  }
  return {
    id: 'c',
    request: {
      kind: 'request',
      id: 1,
      method: 'tools/call',
      params: { name: tool, arguments: {} },
    } as Request,
    identity,
    server,
    transport: 'streamable-http',
    route,
    signal: new AbortController().signal,
    log: silentLogger,
    decisions: [],
  }
}

const EMPTY = buildCatalog([], rules('always'))

const relay = async (c: Call): Promise<Reply> => ({
  kind: 'result',
  id: c.request.id,
  resultType: 'complete',
  result: { ok: true },
})

async function outcome(
  policies: Policy[],
  c: Call,
): Promise<{ allowed: boolean; rule: string | undefined }> {
  try {
    await compose(policies, relay)(c)
    return { allowed: true, rule: c.decisions?.find((d) => d.policy === 'authorize')?.rule }
  } catch (err) {
    assert.equal((err as { code?: string }).code, 'ERR_POLICY_DENIED')
    return { allowed: false, rule: c.decisions?.find((d) => d.policy === 'authorize')?.rule }
  }
}

describe('auth.permissions with and without Cedar (ADR 046)', () => {
  const permitAll = new CedarEngine(
    readPolicyFiles([file('permit (principal, action, resource);')]),
  )
  const forbidWrites = new CedarEngine(
    readPolicyFiles([
      file(`permit (principal, action, resource);
forbid (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"files__write");`),
    ]),
  )

  test('every case decides as authorize alone, with the same rule; explain agrees', async () => {
    let allowedCount = 0
    let cases = 0
    for (const [name, identity] of Object.entries(who)) {
      for (const server of SERVERS) {
        for (const tool of TOOLS) {
          const alone = await outcome([authorize(RULES)], toolCall(identity, server, tool))
          const withCedar = await outcome(
            [authorize(RULES), cedarPolicy(permitAll, 'enforce')],
            toolCall(identity, server, tool),
          )
          const what = `${name} on ${server}: ${tool}`
          assert.deepEqual(withCedar, alone, what)
          const judged = judgePermission(RULES, identity, server, { kind: 'tool', name: tool })
          assert.equal(judged.allowed, alone.allowed, what)
          if (alone.allowed) assert.equal(judged.rule, alone.rule, what)
          const narrowed = await outcome(
            [authorize(RULES), cedarPolicy(forbidWrites, 'enforce')],
            toolCall(identity, server, tool),
          )
          assert.equal(narrowed.allowed, alone.allowed && tool !== 'files__write', what)
          cases++
          if (alone.allowed) allowedCount++
        }
      }
    }
    // The table exercises both outcomes, not one.
    assert.equal(cases, 90)
    assert.ok(allowedCount > 10 && allowedCount < 80, `${allowedCount} allowed`)
  })

  test('the deciding rule is the one explain names', () => {
    assert.deepEqual(
      judgePermission(RULES, who.acme!, 'default', { kind: 'tool', name: 'files__read_dir' }),
      { allowed: true, rule: 'auth.permissions[1]' },
    )
    assert.deepEqual(
      judgePermission(RULES, who.eng!, 'ops-eu', { kind: 'tool', name: 'gh__issue' }),
      { allowed: true, rule: 'auth.permissions[2]' },
    )
    assert.deepEqual(
      judgePermission(RULES, who.carol!, 'default', { kind: 'tool', name: 'gh__issue' }),
      { allowed: false, rule: undefined },
    )
  })
})
