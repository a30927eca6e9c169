import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { childEnvironment, isPassedThrough, passThroughFiles } from './pass-through-env.ts'

describe('the environment a stdio upstream inherits', () => {
  test('passes proxies, CA files, locale and timezone through, and no other variable', () => {
    const env = childEnvironment(
      { API_KEY: 'k' },
      {
        PATH: '/bin',
        HOME: '/home/u',
        HTTP_PROXY: 'http://p:1',
        https_proxy: 'http://p:2',
        ALL_PROXY: 'socks5://p:3',
        NO_PROXY: '.corp',
        SSL_CERT_FILE: '/ca.pem',
        SSL_CERT_DIR: '/certs',
        REQUESTS_CA_BUNDLE: '/ca.pem',
        LANG: 'fr_FR.UTF-8',
        LC_ALL: 'fr_FR.UTF-8',
        TZ: 'Europe/Paris',
        AWS_SECRET_ACCESS_KEY: 'never',
        GITHUB_TOKEN: 'never',
        NODE_OPTIONS: '--require /evil.js',
      },
    )
    assert.deepEqual(env, {
      PATH: '/bin',
      HOME: '/home/u',
      HTTP_PROXY: 'http://p:1',
      https_proxy: 'http://p:2',
      ALL_PROXY: 'socks5://p:3',
      NO_PROXY: '.corp',
      SSL_CERT_FILE: '/ca.pem',
      SSL_CERT_DIR: '/certs',
      REQUESTS_CA_BUNDLE: '/ca.pem',
      LANG: 'fr_FR.UTF-8',
      LC_ALL: 'fr_FR.UTF-8',
      TZ: 'Europe/Paris',
      API_KEY: 'k',
    })
  })

  test('declared values win, and PATH falls back when Barbican has none', () => {
    const env = childEnvironment({ HTTPS_PROXY: '' }, { HTTPS_PROXY: 'http://p:1' })
    assert.deepEqual(env, { PATH: '/usr/local/bin:/usr/bin:/bin', HTTPS_PROXY: '' })
  })

  test('names the CA files a sandbox must let the child read, once each', () => {
    assert.deepEqual(
      passThroughFiles({
        NODE_EXTRA_CA_CERTS: '/etc/proxy-ca.pem',
        SSL_CERT_FILE: '/etc/proxy-ca.pem',
        SSL_CERT_DIR: '/etc/ssl/certs',
        REQUESTS_CA_BUNDLE: '',
        HTTPS_PROXY: 'http://p:1',
      }),
      ['/etc/proxy-ca.pem', '/etc/ssl/certs'],
    )
  })

  test('LC_ variables are locale; look-alikes are not', () => {
    assert.equal(isPassedThrough('LC_MESSAGES'), true)
    assert.equal(isPassedThrough('LCX'), false)
    assert.equal(isPassedThrough('https_proxy'), true)
    assert.equal(isPassedThrough('Https_Proxy'), false)
  })
})
