/**
 * Debian's chromium driven by playwright-core, for the admin console's browser tests and the
 * screenshot script. No browser is downloaded: the binary is `BARBICAN_CHROMIUM` or
 * /usr/bin/chromium, and when it is missing the caller fails with what to install (CI installs
 * it in .ci/run), never skips.
 */
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { type Browser, chromium, type Page } from 'playwright-core'

export const CHROMIUM = process.env.BARBICAN_CHROMIUM ?? '/usr/bin/chromium'

export interface OpenBrowser {
  readonly browser: Browser
  close(): Promise<void>
}

export async function launchChromium(): Promise<OpenBrowser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `chromium is not installed at ${CHROMIUM}: install it (npm run setup, or apt-get install chromium, as .ci/run ` +
        'does) or set BARBICAN_CHROMIUM to its path; the admin console tests need a real browser',
    )
  }
  // playwright-core gives each launch a fresh, empty profile of its own (--user-data-dir).
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  })
  return {
    browser,
    async close() {
      await browser.close()
    },
  }
}

const axeSource = readFileSync(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
)

export interface AxeViolation {
  readonly id: string
  readonly impact: string | null
  readonly help: string
  readonly nodes: readonly { readonly target: readonly string[] }[]
}

/**
 * axe-core's violations on the page as it is. The script is added through the DevTools
 * protocol, not a <script> tag, so the page's CSP (no script at all) stays as served.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource)
  return await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }
    ).axe
    const { violations } = await axe.run()
    return violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target })),
    }))
  })
}
