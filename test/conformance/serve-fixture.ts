/**
 * Starts Barbican in front of the bridge fixture upstream (test/fixtures/bridge-upstream.ts) on
 * a free loopback port and prints its MCP URL; the conformance test and manual runs use it.
 * Usage: node test/conformance/serve-fixture.ts [--era legacy|modern|dual]
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import type { Config } from '../../src/config/config.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

const fixture = fileURLToPath(new URL('../fixtures/bridge-upstream.ts', import.meta.url))

/**
 * The config as if read from a file in a fresh temp folder, so its state (`.barbican/state`)
 * lands there: what the checkout's root holds (a `.barbican/` left by an earlier run) never
 * reaches the fixture's sandbox.
 */
function parsed(config: object): Config {
  const file = join(mkdtempSync(join(tmpdir(), 'barbican-conformance-gw-')), 'barbican.json')
  return parseConfigText(JSON.stringify(config), { json: true, file }).config
}

/** Barbican with one stdio upstream: the fixture in the given era. */
export async function startFixtureGateway(era = 'dual', port = 0): Promise<RunningServer> {
  return await startGatewayFor([fixture, '--era', era], port)
}

/** Barbican with one stdio upstream run by this Node with `args`. */
export async function startGatewayFor(args: string[], port = 0): Promise<RunningServer> {
  const config = {
    listen: `127.0.0.1:${port}`,
    upstreams: { fixture: { command: process.execPath, args } },
  }
  return await startServer(parsed(config), silentLogger)
}

/** Barbican with one Streamable HTTP upstream at `url`. */
export async function startGatewayForUrl(url: string, port = 0): Promise<RunningServer> {
  const config = {
    listen: `127.0.0.1:${port}`,
    upstreams: { fixture: { url, transport: 'streamable-http' } },
  }
  return await startServer(parsed(config), silentLogger)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--era')
  const server = await startFixtureGateway(i >= 0 ? process.argv[i + 1] : 'dual', 7399)
  process.stdout.write(`${server.url}/mcp\n`)
  process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)))
}
