import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import type { Identity } from '../auth/identity.ts'
import { CedarEngine, type CedarQuery, readPolicyFiles, validatePolicies } from './cedar-engine.ts'

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'barbican-cedar-unit-')), 'p.cedar')
  writeFileSync(path, text)
  return path
}

const alice: Identity = {
  subject: 'alice',
  scopes: [],
  method: 'jwt',
  claims: { groups: ['team'], dept: 'ops', level: 3 },
}

const call = (target: CedarQuery['target'], args?: Record<string, unknown>): CedarQuery => ({
  identity: alice,
  server: 'default',
  action: 'call',
  target,
  transport: 'streamable-http',
  method: 'tools/call',
  arguments: args,
})

describe('Cedar engine', () => {
  test('the starter policy set of docs/policy.md validates against the shipped schema', () => {
    const doc = readFileSync(new URL('../../docs/policy.md', import.meta.url), 'utf8')
    const starter = /```cedar\n([\s\S]*?)```/.exec(doc)?.[1]
    assert.ok(starter)
    const policies = readPolicyFiles([file(starter)])
    assert.equal(policies.length, 8)
    assert.deepEqual(validatePolicies(policies), [])
  })

  test('groups, claims, upstream, annotations and arguments reach the policies', () => {
    const engine = new CedarEngine(
      readPolicyFiles([
        file(`permit (principal in Barbican::Group::"team", action, resource in Barbican::Upstream::"files")
when { principal.hasTag("dept") && principal.getTag("dept") == "ops" && principal.getTag("level") == "3" };
forbid (principal, action, resource)
when { resource has annotations && resource.annotations has destructiveHint && resource.annotations.destructiveHint };
forbid (principal, action, resource) when { context.arguments.hasTag("n") && context.arguments.getTag("n") == "7" };
`),
      ]),
    )
    const read = call({ kind: 'tool', name: 'files__read', upstream: 'files' })
    assert.deepEqual(engine.decide(read), {
      allowed: true,
      reasons: [`${engine.policies[0]!.id}`],
      errors: [],
    })
    // Another upstream: no permit.
    assert.equal(engine.decide(call({ kind: 'tool', name: 'x', upstream: 'web' })).allowed, false)
    const destructive = engine.decide(
      call({
        kind: 'tool',
        name: 'files__rm',
        upstream: 'files',
        annotations: { destructiveHint: true },
      }),
    )
    assert.equal(destructive.allowed, false)
    assert.deepEqual(destructive.reasons, [engine.policies[1]!.id])
    // An ill-typed annotation from an upstream is dropped, not an evaluation failure.
    const odd = call({
      kind: 'tool',
      name: 'files__rm',
      upstream: 'files',
      annotations: { destructiveHint: 'yes' },
    })
    assert.equal(engine.decide(odd).allowed, true)
    // Non-string arguments are judged by their JSON text.
    assert.equal(
      engine.decide(call({ kind: 'tool', name: 'files__read', upstream: 'files' }, { n: 7 }))
        .allowed,
      false,
    )
  })

  test('policy ids count the policies in the order of the file, past ten', () => {
    const lines = Array.from(
      { length: 12 },
      (_, i) => `permit (principal == Barbican::User::"u${i + 1}", action, resource);`,
    )
    const policies = readPolicyFiles([file(lines.join('\n'))])
    for (const [i, p] of policies.entries()) {
      assert.ok(p.id.endsWith(`#${i + 1}`))
      assert.match(p.text, new RegExp(`"u${i + 1}"`))
    }
  })

  test('an unreadable or unparsable file is a configuration error', () => {
    assert.throws(() => readPolicyFiles(['/nonexistent/p.cedar']), { code: 'ERR_CONFIG_INVALID' })
    assert.throws(() => readPolicyFiles([file('permit (principal, action resource);')]), {
      code: 'ERR_CONFIG_INVALID',
    })
  })

  describe('split and cached decisions (ADR 045)', () => {
    const text = `permit (principal in Barbican::Group::"team", action == Barbican::Action::"call", resource in Barbican::Upstream::"files");
permit (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"web__fetch") when { context.arguments.hasTag("url") && context.arguments.getTag("url") like "https://*" };
forbid (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"files__write") when { context.arguments.hasTag("path") && !(context.arguments.getTag("path") like "/work/*") };
forbid (principal, action, resource) when { resource.annotations has destructiveHint && resource.annotations.destructiveHint };
forbid (principal, action == Barbican::Action::"call", resource in Barbican::Upstream::"night") when { context.time < 1000 };
permit (principal == Barbican::User::"bob", action, resource);
`
    const policies = readPolicyFiles([file(text)])
    const split = new CedarEngine(policies)
    const whole = new CedarEngine(policies, { split: false })
    const bob: Identity = { subject: 'bob', scopes: [], method: 'api-key' }
    const tool = (name: string, upstream: string, annotations?: Record<string, boolean>) =>
      ({ kind: 'tool', name, upstream, annotations }) as const
    const cases: CedarQuery[] = [
      call(tool('files__read', 'files')),
      call(tool('files__write', 'files'), { path: '/work/a' }),
      call(tool('files__write', 'files'), { path: '/etc/passwd' }),
      call(tool('files__write', 'files')),
      call(tool('files__rm', 'files', { destructiveHint: true })),
      call(tool('web__fetch', 'web'), { url: 'https://example.com' }),
      call(tool('web__fetch', 'web'), { url: 'http://example.com' }),
      call(tool('web__fetch', 'web')),
      { ...call(tool('night__job', 'night')), time: 10 },
      { ...call(tool('night__job', 'night')), time: 5000 },
      { ...call(tool('files__write', 'files'), { path: '/etc' }), identity: bob },
      { ...call(tool('x__y', 'x')), identity: bob },
      { ...call(tool('files__rm', 'files', { destructiveHint: true })), identity: bob },
      { ...call({ kind: 'server' }), action: 'list', method: 'tools/list' },
    ]

    test('the per-call part holds exactly the policies that read arguments or time', () => {
      assert.equal(split.perCall, true)
      const steadyOnly = new CedarEngine(readPolicyFiles([file(text.split('\n')[0]!)]))
      assert.equal(steadyOnly.perCall, false)
    })

    test('split and cached, every case decides as the whole set does, with the same policies', () => {
      const scope = {}
      for (const round of [1, 2]) {
        for (const [i, q] of cases.entries()) {
          const expected = whole.decide(q)
          for (const got of [split.decide(q), split.decide(q, scope)]) {
            assert.equal(got.allowed, expected.allowed, `case ${i}, round ${round}`)
            assert.deepEqual([...got.reasons].sort(), [...expected.reasons].sort(), `case ${i}`)
          }
        }
      }
    })

    test('a cached decision lasts as long as its catalog: a new one is judged afresh', () => {
      const first = {}
      const safe = call(tool('files__rm', 'files', { destructiveHint: false }))
      const marked = call(tool('files__rm', 'files', { destructiveHint: true }))
      assert.equal(split.decide(safe, first).allowed, true)
      // Same catalog: the annotations come from it, so the cached decision stands.
      assert.equal(split.decide(marked, first).allowed, true)
      // A new catalog (its tools changed) judges again.
      assert.equal(split.decide(marked, {}).allowed, false)
    })

    test('an action no policy names is denied, cached or not', () => {
      const odd = { ...call(tool('files__read', 'files')), action: 'nonsense' as never }
      const scope = {}
      const decision = split.decide(odd, scope)
      assert.equal(decision.allowed, false)
      assert.equal(split.decide(odd, scope).allowed, false)
    })
  })
})
