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
    assert.equal(policies.length, 6)
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
})
