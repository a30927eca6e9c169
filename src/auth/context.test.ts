import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { createLocalJWKSet, jwtVerify } from 'jose'
import { AssertionSigner } from './assertion.ts'
import { CONTEXT_META_KEY, childTraceparent, createStamp } from './context.ts'
import type { Identity } from './identity.ts'
import { resourceUri, wwwAuthenticate } from './resource-metadata.ts'

const alice: Identity = {
  subject: 'alice',
  tenant: 'acme',
  client: 'agent',
  scopes: ['mcp:tools'],
  method: 'jwt',
}

function owner(
  identity: Identity,
  headers: Record<string, string> = {},
  clientCapabilities: Record<string, unknown> = { elicitation: { form: {}, url: {} } },
) {
  return { caller: { identity, headers, clientCapabilities }, requestId: 1 }
}

describe('tool-call context', () => {
  test('stamps _meta and headers with the caller and a verifiable on-behalf-of assertion', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const stamp = createStamp({ signer, audience: 'https://up.example/mcp' })
    const out = await stamp(
      'tools/call',
      { name: 't', _meta: { progressToken: 7, 'dev.barbican/context': { user: 'forged' } } },
      owner(alice, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
    )
    assert.ok('params' in out)
    const meta = out.params?._meta as Record<string, Record<string, string>>
    assert.equal(meta.progressToken as unknown, 7)
    assert.equal(meta.traceparent as unknown, out.headers.traceparent)
    const context = meta[CONTEXT_META_KEY]!
    assert.equal(context.user, 'alice')
    assert.equal(context.tenant, 'acme')
    assert.equal(context.client, 'agent')
    assert.equal(out.headers['barbican-assertion'], context.assertion)
    assert.match(out.headers.traceparent!, /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/)
    assert.notEqual(
      out.headers.traceparent,
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    )
    const { payload, protectedHeader } = await jwtVerify(
      context.assertion!,
      createLocalJWKSet(await signer.jwks()),
      { issuer: 'https://gw.example', audience: 'https://up.example/mcp', typ: 'obo+jwt' },
    )
    assert.equal(protectedHeader.alg, 'ES256')
    assert.equal(payload.sub, 'alice')
    assert.equal(payload.tenant, 'acme')
    assert.deepEqual(payload.act, { sub: 'https://gw.example' })
    assert.ok((payload.exp ?? 0) - (payload.iat ?? 0) <= 60)
  })

  test('answers with the linking URL instead of sending when the upstream needs an account link', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const stamp = createStamp({
      signer,
      audience: 'x',
      credentials: {
        forUser: async () => ({
          linkRequired: { url: 'https://gw.example/link/abc', message: 'Link GitHub.' },
        }),
      },
    })
    const out = await stamp('tools/call', { name: 't' }, owner(alice))
    assert.ok('reply' in out)
    assert.equal(out.reply.code, -32042)
    assert.match(out.reply.message, /https:\/\/gw\.example\/link\/abc/)
    const data = out.reply.data as { elicitations: { mode: string; url: string }[] }
    assert.equal(data.elicitations[0]?.mode, 'url')
    assert.equal(data.elicitations[0]?.url, 'https://gw.example/link/abc')

    const plain = await stamp('tools/call', { name: 't' }, owner(alice, {}, { elicitation: {} }))
    assert.ok('reply' in plain)
    assert.equal(plain.reply.code, -32602, 'no URL mode declared: a precise error instead')
    assert.match(plain.reply.message, /https:\/\/gw\.example\/link\/abc/)
    assert.deepEqual(plain.reply.data, {
      barbicanCode: 'ERR_LINK_REQUIRED',
      url: 'https://gw.example/link/abc',
    })
  })

  test('a held call (no session, no connection info) is stamped and credentialed for its caller', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const askedFor: string[] = []
    const stamp = createStamp({
      signer,
      audience: 'x',
      credentials: {
        forUser: async (identity) => {
          askedFor.push(identity.subject)
          return { headers: { authorization: `Bearer token-of-${identity.subject}` } }
        },
      },
    })
    // What forwarding records for a held 2026-07-28 call: a stand-in requester, and the caller.
    const heldOwner = {
      session: { requestClient: async () => assert.fail('not asked'), parked: true },
      requestId: 1,
      caller: { identity: alice, clientCapabilities: {} },
    }
    const out = await stamp('tools/call', { name: 't' }, heldOwner)
    assert.ok('params' in out)
    assert.deepEqual(askedFor, ['alice'], 'per-user credentials looked up for the caller')
    assert.equal(out.headers.authorization, 'Bearer token-of-alice')
    const meta = out.params?._meta as Record<string, Record<string, string>> | undefined
    assert.equal(meta?.[CONTEXT_META_KEY]?.user, 'alice')
  })

  test('calls of one caller to one upstream share the assertion but not the span or trace', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const stamp = createStamp({ signer, audience: 'https://up.example/mcp' })
    const other = createStamp({ signer, audience: 'https://other.example/mcp' })
    const contexts = []
    for (let i = 0; i < 3; i++) {
      const out = await stamp('tools/call', { name: 't' }, owner(alice))
      assert.ok('params' in out)
      contexts.push(
        (out.params!._meta as Record<string, Record<string, string>>)[CONTEXT_META_KEY]!,
      )
    }
    assert.equal(new Set(contexts.map((c) => c.assertion)).size, 1)
    assert.equal(new Set(contexts.map((c) => c.traceparent)).size, 3)
    const elsewhere = await other('tools/call', { name: 't' }, owner(alice))
    assert.ok('params' in elsewhere)
    const assertion = elsewhere.headers['barbican-assertion']!
    assert.notEqual(assertion, contexts[0]!.assertion)
    const jwks = createLocalJWKSet(await signer.jwks())
    await jwtVerify(assertion, jwks, { audience: 'https://other.example/mcp' })
    await assert.rejects(jwtVerify(assertion, jwks, { audience: 'https://up.example/mcp' }))
  })

  test('trace and span ids stay unique across refills of the random pool', () => {
    const seen = new Set<string>()
    for (let i = 0; i < 1000; i++) {
      const [, trace, span] = childTraceparent(undefined).split('-')
      assert.ok(!seen.has(trace!) && !seen.has(span!))
      seen.add(trace!)
      seen.add(span!)
    }
  })

  test('starts a new trace when the caller sent none or an invalid one', () => {
    assert.match(childTraceparent(undefined), /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
    const zero = childTraceparent('00-00000000000000000000000000000000-b7ad6b7169203331-01')
    assert.doesNotMatch(zero, /^00-0{32}/)
  })
})

describe('resource metadata helpers', () => {
  test('canonical resource URIs are lower-case, without trailing slash, per virtual server', () => {
    assert.equal(resourceUri('HTTPS://GW.Example.com/', 'default'), 'https://gw.example.com/mcp')
    assert.equal(
      resourceUri('https://gw.example.com/base/', 'gh'),
      'https://gw.example.com/base/mcp/gh',
    )
  })

  test('challenge text cannot break out of its quotes', () => {
    const header = wwwAuthenticate({
      resourceMetadata: 'https://gw/.well-known/oauth-protected-resource/mcp',
      scopes: ['a'],
      error: 'invalid_token',
      description: 'bad "quote"\r\nInjected: yes',
    })
    assert.equal(
      header,
      'Bearer resource_metadata="https://gw/.well-known/oauth-protected-resource/mcp", scope="a", error="invalid_token", error_description="bad quoteInjected: yes"',
    )
  })
})
