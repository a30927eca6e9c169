/**
 * A browser automation server (issue 29 point 7): @playwright/mcp starts Debian's Chromium, a
 * child process, and browses a page served on a loopback port of the host. Configured as its
 * README says, with the options a confined host needs: Debian's browser (`--executable-path`,
 * nothing is downloaded), `--headless`, `--no-sandbox` (Chromium's own sandbox needs namespaces,
 * which the seccomp filter refuses) and `--allowed-origins`, the site it may browse. That origin
 * is a URL in its arguments, so it is a connect grant: a TCP forward listening on the same
 * `127.0.0.1:PORT` inside, which Chromium reaches directly (it never proxies loopback). The
 * evidence is the request the page's HTTP server received, outside Barbican.
 *
 * Under the fallback Chromium is a child process, which the Node.js permission model never
 * allows: the call fails and its error says so, naming bubblewrap and `sandbox: none` (ADR 108).
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { CHROMIUM } from '../support/browser.ts'
import {
  connect,
  importConfig,
  MECHANISMS,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry.
const SPEC = '@playwright/mcp@0.0.86'
const TITLE = 'Barbican marker page'

for (const mechanism of MECHANISMS) {
  describe(`@playwright/mcp with Debian's chromium, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let site: Server
    let origin: string
    const seen: string[] = []
    let file: string

    before(async () => {
      site = createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`)
        res.setHeader('content-type', 'text/html')
        res.end(`<html><head><title>${TITLE}</title></head><body>hello</body></html>`)
      })
      await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
      origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`
      project = workspace(`browser-${mechanism}`)
      const args = [SPEC, '--executable-path', CHROMIUM, '--headless', '--no-sandbox']
      writeClaudeConfig(project.dir, {
        playwright: { command: 'npx', args: [...args, '--allowed-origins', origin] },
      })
      file = (await importConfig(project.dir)).file
    })

    after(async () => {
      site.closeAllConnections()
      await new Promise((resolve) => site.close(resolve))
      project.remove()
    })

    async function navigate(): Promise<string> {
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        try {
          return await client.call('browser_navigate', { url: `${origin}/page` })
        } finally {
          await client.close()
        }
      } finally {
        await gateway.stop()
      }
    }

    if (mechanism === 'bubblewrap') {
      test('Chromium, its child, fetches the page from the host through the forward', async () => {
        const answer = await navigate()
        assert.match(answer, new RegExp(`Page Title: ${TITLE}`))
        assert.ok(seen.includes('GET /page'), JSON.stringify(seen))
      })
      return
    }

    test('cannot start Chromium, and the error says why and what runs it', async () => {
      await assert.rejects(navigate(), (error: Error) => {
        assert.match(error.message, /--allow-child-process/)
        assert.match(error.message, /never allows child processes: no grant helps/)
        assert.match(error.message, /bubblewrap, or unconfined with sandbox: none/)
        return true
      })
      assert.deepEqual(seen, [])
    })
  })
}
