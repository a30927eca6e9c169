/**
 * The direction of dependencies between the parts of src/ (docs/decisions/024): each module may
 * import its own layer and the layers below it, never one above. The layers are concepts; where
 * each one lives is a separate table (PLACES): one folder per layer.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import { describe, it } from 'node:test'
import { checkLayers, importsOf, type LayerRules } from '../support/layering.ts'

/** From the bottom up. */
const LAYERS = [
  /** JSON-RPC, revisions, codecs: pure, imports nothing of ours. */
  'protocol',
  /** Errors, lazily loaded dependencies, small helpers: what every layer uses. */
  'common',
  /** The log, traces, OpenTelemetry export and Prometheus metrics every layer may write into. */
  'telemetry',
  /**
   * What the operator asked for, in one shape: schemas, defaults, the sandbox specification.
   * A leaf (ADR 114): it imports only the layers listed before it.
   */
  'config',
  /** The guarded HTTP client and the address rules it shares with the egress proxy. */
  'net',
  /** Pin and baseline storage. */
  'store',
  /** The tamper-evident audit log: records, chain, checkpoints, storage. */
  'audit',
  /** Inbound identity: who a call is for. */
  'auth',
  /** Confinement of local servers: bubblewrap, seccomp, environment, egress, installs, refusals. */
  'sandbox',
  /** How bytes move; knows identities (inbound) but nothing of routing. */
  'transports',
  /** Replicas made one gateway: liveness, session owners and relays, the fleet's bus. */
  'cluster',
  /** Where two MCP revisions meet. */
  'bridge',
  /** Barbican's connections to upstream servers. */
  'upstreams',
  /** What Barbican presents upstream. */
  'credentials',
  /** What a virtual server lists: the catalog's items, names and URIs. */
  'catalog',
  /** How the catalog reaches the model: tool search, code mode, tools-only adapters, tokens. */
  'exposure',
  /** Pins, quarantine, scans, launch checks. */
  'trust',
  /** Virtual servers over their upstreams, and the route of each request. */
  'virtual-servers',
  /** The chain every call passes through on its way to the relay. */
  'policies',
  /** One client connection: what lives across its requests. */
  'session',
  /**
   * One request from decode to encode (the exchange and its steps), and what relays a call to
   * its upstream: unicast, forwarding, the era translation.
   */
  'relay',
  /** Builds everything from a plan. */
  'gateway',
  /** The admin console, admin API, landing page, readiness and metrics endpoints. */
  'admin',
  /**
   * The application assembled (ADR 118): what `serve` and `stdio` open, start, reload and close,
   * the fleet membership, and the stack of clean-up steps. Above gateway and admin, below cli.
   */
  'app',
  /** The `barbican` command. */
  'cli',
] as const

type Layer = (typeof LAYERS)[number]

/**
 * Where each layer lives under src/: one folder per layer.
 */
const PLACES: Readonly<Record<string, Layer>> = {
  'protocol/': 'protocol',
  'common/': 'common',
  'telemetry/': 'telemetry',
  'config/': 'config',
  'net/': 'net',
  'store/': 'store',
  'audit/': 'audit',
  'auth/': 'auth',
  'sandbox/': 'sandbox',
  'transports/': 'transports',
  'cluster/': 'cluster',
  'bridge/': 'bridge',
  'upstreams/': 'upstreams',
  'credentials/': 'credentials',
  'catalog/': 'catalog',
  'exposure/': 'exposure',
  'trust/': 'trust',
  'virtual-servers/': 'virtual-servers',
  'policies/': 'policies',
  'session/': 'session',
  'relay/': 'relay',
  'gateway/': 'gateway',
  'admin/': 'admin',
  'app/': 'app',
  'cli/': 'cli',
}

/** Upward imports the code has today: none, and the list may only stay empty. */
const EXCEPTIONS: LayerRules['exceptions'] = []

const RULES: LayerRules = { layers: LAYERS, places: PLACES, exceptions: EXCEPTIONS }

const SRC = new URL('../../src/', import.meta.url).pathname

/** Every non-test module of src/, by path relative to src/ with `/`. */
function sourceModules(): Map<string, string> {
  const modules = new Map<string, string>()
  for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts')) continue
    const path = join(entry.parentPath, entry.name)
    modules.set(relative(SRC, path).split(sep).join('/'), readFileSync(path, 'utf8'))
  }
  return modules
}

describe('layering of src/', () => {
  it('every module imports only its own layer and the layers below it', () => {
    const modules = sourceModules()
    assert.ok(modules.size > 100, `found only ${modules.size} modules under ${SRC}`)
    const report = checkLayers(modules, RULES)
    assert.deepEqual(report.violations, [])
    assert.deepEqual(report.unusedExceptions, [], 'remove exceptions nothing needs any more')
  })
})

describe('the tree of src/', () => {
  it('holds only folders at its root, one per layer', () => {
    const root = readdirSync(SRC, { withFileTypes: true })
    assert.deepEqual(
      root.filter((e) => !e.isDirectory()).map((e) => e.name),
      [],
      'loose files in src/: move each into the folder of its concept',
    )
    const folders = root.map((e) => `${e.name}/`).sort()
    assert.deepEqual(folders, Object.keys(PLACES).sort())
  })
})

describe('the layering checker', () => {
  const rules: LayerRules = {
    layers: ['protocol', 'shared', 'transports', 'relay'],
    places: { 'protocol/': 'protocol', 'errors.ts': 'shared', 'transports/': 'transports' },
    exceptions: [],
  }

  it('reports a lower layer importing a higher one', () => {
    const report = checkLayers(
      new Map([
        ['transports/stdio.ts', "import { route } from '../relay/route.ts'\n"],
        ['protocol/codec.ts', "import type { BarbicanError } from '../errors.ts'\n"],
      ]),
      { ...rules, places: { ...rules.places, 'relay/': 'relay' } },
    )
    assert.deepEqual(report.violations, [
      'transports/stdio.ts (transports) imports relay/route.ts (relay), a layer above it',
      'protocol/codec.ts (protocol) imports errors.ts (shared), a layer above it',
    ])
  })

  it('accepts imports of the same layer and of lower layers', () => {
    const report = checkLayers(
      new Map([
        ['transports/stdio.ts', "import './line.ts'\nimport { x } from '../protocol/jsonrpc.ts'\n"],
        ['errors.ts', "import { INTERNAL_ERROR } from './protocol/jsonrpc.ts'\n"],
      ]),
      rules,
    )
    assert.deepEqual(report.violations, [])
  })

  it('reports modules and imports that belong to no layer', () => {
    const report = checkLayers(
      new Map([
        ['stray.ts', ''],
        ['transports/stdio.ts', "import { route } from '../relay/route.ts'\n"],
      ]),
      rules,
    )
    assert.deepEqual(report.violations, [
      'stray.ts belongs to no layer: add its folder or file to the places',
      'transports/stdio.ts imports relay/route.ts, which belongs to no layer',
    ])
  })

  it('tolerates a listed exception and reports one nothing needs', () => {
    const modules = new Map([
      ['protocol/codec.ts', "import type { BarbicanError } from '../errors.ts'\n"],
    ])
    const exceptions = [
      { from: 'protocol/codec.ts', to: 'errors.ts', why: 'test' },
      { from: 'protocol/model.ts', to: 'errors.ts', why: 'stale' },
    ]
    const report = checkLayers(modules, { ...rules, exceptions })
    assert.deepEqual(report.violations, [])
    assert.deepEqual(report.unusedExceptions, ['protocol/model.ts → errors.ts'])
  })

  it('reads type-only imports, re-exports and dynamic imports', () => {
    const source = [
      "import type { A } from './a.ts'",
      "export { B } from './b.ts'",
      "export type { C } from './c.ts'",
      "const d = await import('./d.ts')",
      "import { readFileSync } from 'node:fs'",
    ].join('\n')
    assert.deepEqual(importsOf(source), ['./a.ts', './b.ts', './c.ts', './d.ts'])
  })
})
