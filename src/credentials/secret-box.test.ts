import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import { keyProviderFromEnv, LocalKeyProvider, SecretError } from './secret-box.ts'

describe('secret box', () => {
  test('seals with AES-256-GCM and opens only in the same slot with the same key', async () => {
    const keys = new LocalKeyProvider(randomBytes(32))
    const sealed = await keys.seal('Bearer s3cret', 'upstream:gh:header:authorization')
    assert.match(sealed, /^enc:v1:/)
    assert.ok(!sealed.includes('s3cret'))
    assert.equal(await keys.open(sealed, 'upstream:gh:header:authorization'), 'Bearer s3cret')
    await assert.rejects(keys.open(sealed, 'upstream:other:header:authorization'), SecretError)
    await assert.rejects(new LocalKeyProvider(randomBytes(32)).open(sealed, 'x'), SecretError)
    const tampered = `${sealed.slice(0, -2)}${sealed.endsWith('A') ? 'B' : 'A'}A`
    await assert.rejects(keys.open(tampered, 'upstream:gh:header:authorization'), SecretError)
  })

  test('takes the key from BARBICAN_SECRET_KEY (base64 or hex) and refuses a short one', async () => {
    const raw = randomBytes(32)
    const a = keyProviderFromEnv({ BARBICAN_SECRET_KEY: raw.toString('base64') })
    const b = keyProviderFromEnv({ BARBICAN_SECRET_KEY: raw.toString('hex') })
    assert.equal(a.ephemeral, false)
    assert.equal(await b.provider.open(await a.provider.seal('v', 'c'), 'c'), 'v')
    assert.equal(keyProviderFromEnv({}).ephemeral, true)
    assert.throws(() => keyProviderFromEnv({ BARBICAN_SECRET_KEY: 'c2hvcnQ=' }), SecretError)
  })
})
