import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { bindBrowser, clearBrowserBinding, isSameBrowser } from './link-browser.ts'

const scope = { path: '/oauth/callback', secure: false }

describe('binding an account link to the browser that started it', () => {
  test('the cookie is Secure when Barbican is reached over https, and only then', () => {
    assert.match(bindBrowser('s1', { ...scope, secure: true }).setCookie, /; SameSite=Lax; Secure$/)
    assert.doesNotMatch(bindBrowser('s1', scope).setCookie, /Secure/)
    assert.equal(
      clearBrowserBinding('s1', { ...scope, secure: true }),
      'barbican-link-s1=; Path=/oauth/callback; Max-Age=0; HttpOnly; SameSite=Lax; Secure',
    )
  })

  test('only the nonce of that state, from that browser, passes', () => {
    const a = bindBrowser('stateA', scope)
    const b = bindBrowser('stateB', scope)
    const cookieA = a.setCookie.split(';')[0]!
    const nonceB = b.setCookie.split(';')[0]!.split('=')[1]!
    assert.equal(isSameBrowser(`other=1; ${cookieA}`, 'stateA', a.hash), true)
    assert.equal(isSameBrowser(undefined, 'stateA', a.hash), false)
    assert.equal(isSameBrowser(cookieA, 'stateB', b.hash), false, 'another state’s cookie')
    assert.equal(isSameBrowser(`barbican-link-stateA=${nonceB}`, 'stateA', a.hash), false)
    assert.equal(isSameBrowser('barbican-link-stateA=', 'stateA', a.hash), false)
  })
})
