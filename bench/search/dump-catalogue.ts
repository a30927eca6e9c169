/**
 * Dumps the `tools/list` of real MCP servers into the benchmark's catalogue fixture
 * (bench/search/catalogue.json). Run once, by hand, after installing the packages named in
 * SERVERS (exact versions) in a scratch folder: the benchmark reads only the committed fixture.
 *
 *   npm install --ignore-scripts --prefix /tmp/mcpdump PACKAGE@VERSION …
 *   node bench/search/dump-catalogue.ts /tmp/mcpdump
 *
 * Each server runs with dummy credentials: listing tools needs none of them.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

interface ServerSource {
  /** The upstream name the benchmark's virtual server gives it. */
  readonly name: string
  readonly pkg: string
  readonly version: string
  /** The bin's path inside the package. */
  readonly bin: string
  readonly args?: readonly string[]
  readonly env?: Readonly<Record<string, string>>
  /** Installed beside Barbican (devDependencies) rather than in the scratch folder. */
  readonly local?: boolean
}

const scratch = mkdtempSync(join(tmpdir(), 'dump-'))

export const SERVERS: readonly ServerSource[] = [
  {
    name: 'everything',
    pkg: '@modelcontextprotocol/server-everything',
    version: '2026.8.31',
    bin: 'dist/index.js',
    args: ['stdio'],
    local: true,
  },
  {
    name: 'memory',
    pkg: '@modelcontextprotocol/server-memory',
    version: '2026.8.31',
    bin: 'dist/index.js',
    local: true,
    env: { MEMORY_FILE_PATH: join(scratch, 'memory.json') },
  },
  {
    name: 'filesystem',
    pkg: '@modelcontextprotocol/server-filesystem',
    version: '2026.8.31',
    bin: 'dist/index.js',
    args: [scratch],
    local: true,
  },
  {
    name: 'github',
    pkg: '@modelcontextprotocol/server-github',
    version: '2025.4.8',
    bin: 'dist/index.js',
    env: { GITHUB_PERSONAL_ACCESS_TOKEN: 'dummy' },
  },
  {
    name: 'gitlab',
    pkg: '@modelcontextprotocol/server-gitlab',
    version: '2025.4.25',
    bin: 'dist/index.js',
    env: { GITLAB_PERSONAL_ACCESS_TOKEN: 'dummy' },
  },
  {
    name: 'slack',
    pkg: '@modelcontextprotocol/server-slack',
    version: '2025.4.25',
    bin: 'dist/index.js',
    env: { SLACK_BOT_TOKEN: 'xoxb-dummy', SLACK_TEAM_ID: 'T0' },
  },
  {
    name: 'maps',
    pkg: '@modelcontextprotocol/server-google-maps',
    version: '0.6.2',
    bin: 'dist/index.js',
    env: { GOOGLE_MAPS_API_KEY: 'dummy' },
  },
  {
    name: 'notion',
    pkg: '@notionhq/notion-mcp-server',
    version: '2.5.2',
    bin: 'bin/cli.mjs',
    env: { NOTION_TOKEN: 'dummy' },
  },
  { name: 'playwright', pkg: '@playwright/mcp', version: '0.0.83', bin: 'cli.js' },
  {
    name: 'devtools',
    pkg: 'chrome-devtools-mcp',
    version: '1.11.0',
    bin: 'build/src/bin/chrome-devtools-mcp.js',
  },
  { name: 'chart', pkg: '@antv/mcp-server-chart', version: '0.9.10', bin: 'build/index.js' },
  { name: 'kubernetes', pkg: 'mcp-server-kubernetes', version: '4.1.7', bin: 'dist/index.js' },
  {
    name: 'commander',
    pkg: '@wonderwhy-er/desktop-commander',
    version: '0.2.52',
    bin: 'dist/index.js',
  },
  {
    name: 'firecrawl',
    pkg: 'firecrawl-mcp',
    version: '3.26.0',
    bin: 'dist/index.js',
    env: { FIRECRAWL_API_KEY: 'fc-dummy' },
  },
  {
    name: 'mongodb',
    pkg: 'mongodb-mcp-server',
    version: '3.0.4',
    bin: 'dist/esm/index.js',
    env: { MDB_MCP_TELEMETRY: 'disabled' },
  },
  {
    name: 'circleci',
    pkg: '@circleci/mcp-server-circleci',
    version: '0.20.0',
    bin: 'dist/index.js',
    env: { CIRCLECI_TOKEN: 'dummy' },
  },
  {
    name: 'brave',
    pkg: '@modelcontextprotocol/server-brave-search',
    version: '0.6.2',
    bin: 'dist/index.js',
    env: { BRAVE_API_KEY: 'dummy' },
  },
  {
    name: 'redis',
    pkg: '@modelcontextprotocol/server-redis',
    version: '2025.4.25',
    bin: 'dist/index.js',
    args: ['redis://127.0.0.1:6379'],
  },
  {
    name: 'thinking',
    pkg: '@modelcontextprotocol/server-sequential-thinking',
    version: '2026.8.31',
    bin: 'dist/index.js',
  },
]

async function dump(source: ServerSource, root: string): Promise<object> {
  const dir = join(source.local ? process.cwd() : root, 'node_modules', source.pkg)
  const installed = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version
  if (installed !== source.version)
    throw new Error(`${source.pkg}: ${installed} installed, ${source.version} wanted`)
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(dir, source.bin), ...(source.args ?? [])],
    env: { PATH: process.env.PATH ?? '', HOME: scratch, ...source.env },
    cwd: scratch,
    stderr: 'ignore',
  })
  const client = new Client({ name: 'barbican-bench-dump', version: '1.0.0' })
  await client.connect(transport)
  const tools = []
  let cursor: string | undefined
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor })
    tools.push(...page.tools)
    cursor = page.nextCursor
  } while (cursor !== undefined)
  const info = client.getServerVersion()
  const instructions = client.getInstructions()
  await client.close()
  return {
    name: source.name,
    package: `${source.pkg}@${source.version}`,
    serverInfo: info,
    instructions,
    tools,
  }
}

const root = process.argv[2]
if (root === undefined) throw new Error('usage: node bench/search/dump-catalogue.ts SCRATCH_FOLDER')
const servers = []
for (const source of SERVERS) {
  try {
    const s = (await dump(source, root)) as { tools: unknown[] }
    console.log(`${source.name}: ${s.tools.length} tools`)
    servers.push(s)
  } catch (error) {
    console.log(`${source.name}: FAILED ${(error as Error).message}`)
  }
}
writeFileSync(
  new URL('./catalogue.json', import.meta.url),
  `${JSON.stringify({ servers }, null, 1)}\n`,
)
