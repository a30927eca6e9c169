import assert from 'node:assert/strict'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { classifyAddress } from './address-policy.ts'
import { createGuardedFetch, FetchRefusedError } from './guarded-fetch.ts'

describe('classifyAddress', () => {
  test('names loopback, private, link-local and mapped addresses, and passes public ones', () => {
    assert.equal(classifyAddress('127.0.0.1'), 'loopback')
    assert.equal(classifyAddress('::1'), 'loopback')
    assert.equal(classifyAddress('10.1.2.3'), 'private')
    assert.equal(classifyAddress('172.20.0.1'), 'private')
    assert.equal(classifyAddress('192.168.1.1'), 'private')
    assert.equal(classifyAddress('fd00::1'), 'private')
    assert.equal(classifyAddress('169.254.169.254'), 'link-local')
    assert.equal(classifyAddress('fe80::1'), 'link-local')
    assert.equal(classifyAddress('::ffff:127.0.0.1'), 'loopback')
  })

  test('judges an IPv6 address by the IPv4 address it embeds (mapped, compatible, NAT64, 6to4, Teredo)', () => {
    assert.equal(classifyAddress('::ffff:7f00:1'), 'loopback')
    assert.equal(classifyAddress('::127.0.0.1'), 'loopback')
    assert.equal(classifyAddress('::7f00:1'), 'loopback')
    assert.equal(classifyAddress('64:ff9b::7f00:1'), 'loopback')
    assert.equal(classifyAddress('64:ff9b::10.0.0.1'), 'private')
    assert.equal(classifyAddress('64:ff9b:1::a9fe:a9fe'), 'link-local')
    assert.equal(classifyAddress('2002:7f00:1::1'), 'loopback')
    assert.equal(classifyAddress('2002:c0a8:101::1'), 'private')
    // Teredo: client 127.0.0.1 is stored inverted (0x80ff:fffe).
    assert.equal(classifyAddress('2001:0:4136:e378:8000:63bf:80ff:fffe'), 'loopback')
    assert.equal(classifyAddress('[64:ff9b::7f00:1]'), 'loopback')
    // Embedding a public address stays public; so do ordinary public IPv6 addresses.
    assert.equal(classifyAddress('64:ff9b::808:808'), 'public')
    assert.equal(classifyAddress('2002:808:808::1'), 'public')
    assert.equal(classifyAddress('2606:4700::1111'), 'public')
    assert.equal(classifyAddress('::'), 'reserved')
    assert.equal(classifyAddress('::1'), 'loopback')
    assert.equal(classifyAddress('0.0.0.0'), 'reserved')
    assert.equal(classifyAddress('93.184.216.34'), 'public')
    assert.equal(classifyAddress('2606:4700::1111'), 'public')
  })
})

describe('guarded fetch', () => {
  let server: Server
  let origin: string
  const seen: IncomingHttpHeaders[] = []
  before(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers)
      const url = new URL(req.url ?? '/', 'http://x')
      const to = url.searchParams.get('to')
      if (to) {
        res.writeHead(302, { location: to }).end()
        return
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  test('refuses schemes other than http and https', async () => {
    const fetch = createGuardedFetch({ allow: ['127.0.0.1'] })
    try {
      await assert.rejects(fetch('file:///etc/passwd'), FetchRefusedError)
      await assert.rejects(fetch('ftp://127.0.0.1/'), FetchRefusedError)
    } finally {
      await fetch.close()
    }
  })

  test('refuses loopback, private and link-local targets unless allowlisted', async () => {
    const strict = createGuardedFetch()
    const open = createGuardedFetch({ allow: ['127.0.0.0/8'] })
    try {
      await assert.rejects(strict(`${origin}/`), FetchRefusedError)
      await assert.rejects(strict('https://10.0.0.1/'), /private address/)
      await assert.rejects(strict('https://169.254.169.254/latest/meta-data'), /link-local/)
      await assert.rejects(strict('https://[::ffff:127.0.0.1]/'), /loopback/)
      const res = await open(`${origin}/`)
      assert.equal(await res.text(), 'ok')
    } finally {
      await strict.close()
      await open.close()
    }
  })

  test('allows plain http only to loopback addresses', async () => {
    const fetch = createGuardedFetch({ allow: ['93.184.216.34'] })
    try {
      await assert.rejects(fetch('http://93.184.216.34/'), /only allowed to loopback/)
    } finally {
      await fetch.close()
    }
  })

  test('checks names at connect time, so localhost is refused unless its address is allowlisted', async () => {
    const port = new URL(origin).port
    const strict = createGuardedFetch({ allow: ['localhost'] })
    const byAddress = createGuardedFetch({ allow: ['localhost', '127.0.0.1', '::1'] })
    try {
      await assert.rejects(strict(`https://127.0.0.1:${port}/`), /not allowlisted/)
      const res = await byAddress(`http://localhost:${port}/`)
      assert.equal(res.status, 200)
      await res.body?.cancel()
    } finally {
      await strict.close()
      await byAddress.close()
    }
  })

  test('re-checks every redirect and drops credentials when the origin changes', async () => {
    const fetch = createGuardedFetch({ allow: ['127.0.0.1', 'localhost', '::1'] })
    try {
      await assert.rejects(
        fetch(`${origin}/?to=${encodeURIComponent('https://169.254.169.254/')}`),
        /link-local/,
      )
      const port = new URL(origin).port
      seen.length = 0
      const res = await fetch(`${origin}/?to=${encodeURIComponent(`http://localhost:${port}/x`)}`, {
        headers: { authorization: 'Bearer secret' },
      })
      assert.equal(res.status, 200)
      await res.body?.cancel()
      assert.equal(seen.length, 2)
      assert.equal(seen[0]?.authorization, 'Bearer secret')
      assert.equal(seen[1]?.authorization, undefined)
    } finally {
      await fetch.close()
    }
  })

  test('gives up after too many redirects', async () => {
    const fetch = createGuardedFetch({ allow: ['127.0.0.1'], maxRedirects: 2 })
    const loop = (n: number): string =>
      n === 0 ? `${origin}/` : `${origin}/?to=${encodeURIComponent(loop(n - 1))}`
    try {
      await assert.rejects(fetch(loop(4)), /Too many redirects/)
    } finally {
      await fetch.close()
    }
  })
})
