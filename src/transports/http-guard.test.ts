import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { DEFAULT_ALLOWED_HOSTS, LOOPBACK_ORIGINS } from '../config/defaults.ts'
import { checkRequestHeaders, isHostAllowed, isOriginAllowed } from './http-guard.ts'

describe('Host allowlist', () => {
  it('accepts the loopback names with any port by default', () => {
    for (const host of ['localhost', 'localhost:7300', '127.0.0.1:1', '[::1]:8080', 'LOCALHOST']) {
      assert.equal(isHostAllowed(host, DEFAULT_ALLOWED_HOSTS), true, host)
    }
  })

  it('refuses other names, including look-alikes of loopback', () => {
    for (const host of [
      'evil.example',
      'localhost.evil.example',
      '127.0.0.1.nip.io',
      '[::2]',
      'a:b',
    ]) {
      assert.equal(isHostAllowed(host, DEFAULT_ALLOWED_HOSTS), false, host)
    }
  })

  it('honours explicit ports, subdomain wildcards and the catch-all', () => {
    assert.equal(isHostAllowed('api.example:443', ['api.example:443']), true)
    assert.equal(isHostAllowed('api.example:8443', ['api.example:443']), false)
    assert.equal(isHostAllowed('a.b.example', ['*.example']), true)
    assert.equal(isHostAllowed('example', ['*.example']), false)
    assert.equal(isHostAllowed('anything:1', ['*']), true)
  })
})

describe('Origin allowlist', () => {
  it('accepts loopback origins on any port by default', () => {
    for (const origin of ['http://localhost:6274', 'http://127.0.0.1', 'https://[::1]:9']) {
      assert.equal(isOriginAllowed(origin, LOOPBACK_ORIGINS), true, origin)
    }
  })

  it('refuses foreign, opaque and malformed origins', () => {
    for (const origin of [
      'https://evil.example',
      'null',
      'file://',
      'http://localhost/path',
      'x',
    ]) {
      assert.equal(isOriginAllowed(origin, LOOPBACK_ORIGINS), false, origin)
    }
  })

  it('pins the port when the entry names one, even the scheme default', () => {
    assert.equal(isOriginAllowed('https://app.example', ['https://app.example:443']), true)
    assert.equal(isOriginAllowed('https://app.example:8443', ['https://app.example:443']), false)
    assert.equal(isOriginAllowed('http://app.example:80', ['https://app.example']), false)
  })
})

describe('checkRequestHeaders', () => {
  it('names the header and the reason of a refusal', () => {
    const refusal = checkRequestHeaders(
      { host: 'localhost:1', origin: 'https://evil.example' },
      DEFAULT_ALLOWED_HOSTS,
      LOOPBACK_ORIGINS,
    )
    assert.equal(refusal?.header, 'origin')
    assert.match(refusal?.reason ?? '', /evil\.example/)
    assert.equal(checkRequestHeaders({}, DEFAULT_ALLOWED_HOSTS, [])?.header, 'host')
    assert.equal(checkRequestHeaders({ host: 'localhost' }, DEFAULT_ALLOWED_HOSTS, []), undefined)
  })
})
