/**
 * Puts trust into a gateway plan built from a configuration: the pin guard over the store, each
 * upstream's policy, and the launch check in front of every stdio upstream's transport factory.
 * The CLI opens the store and names the lockfile; code that builds a gateway without files
 * (tests) gets an in-memory store and no lockfile.
 */
import { readFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import type { AuditSink } from '../audit/audit-log.ts'
import { BarbicanError, toBarbicanError } from '../common/errors.ts'
import type { Config, StoreConfig, UpstreamConfig } from '../config/config.ts'
import { DEFAULT_STORE_PATH } from '../config/defaults.ts'
import {
  type AllowScripts,
  cacheSlot,
  inCacheSlot,
  installNpmPackage,
  needsScripts,
  npxPackageOf,
  type ScriptsRecord,
  scriptsRecord,
  skippedScriptsMessage,
} from '../sandbox/npm-install.ts'
import { findExecutable } from '../sandbox/sandbox.ts'
import { memoryStore } from '../store/memory.ts'
import { openSqliteStore } from '../store/sqlite.ts'
import type { Store } from '../store/store.ts'
import type { Logger } from '../telemetry/log.ts'
import { createOutboundTransport } from '../transports/connect-outbound.ts'
import type { Transport } from '../transports/transport.ts'
import type { CommandHint } from '../trust/command-hint.ts'
import { checkLaunch, type LaunchRefusal } from '../trust/launch-check.ts'
import { findNpmPackage, LOCKFILE_NAME, readLockfile, scriptsAllowed } from '../trust/lockfile.ts'
import { DEFAULT_TRUST_POLICY, type TrustPolicy } from '../trust/policy.ts'
import type { VersionResolver } from '../trust/registry-version.ts'
import { TrustGuard } from '../trust/trust-guard.ts'
import { DeferredTransport } from './deferred-transport.ts'
import type { GatewayPlan, UpstreamPlan } from './gateway.ts'

/** What trust needs besides the config: the open store and where the lockfile is. */
export interface TrustSetup {
  readonly store: Store
  /** `barbican.lock`; undefined: launches are checked for floating versions only. */
  readonly lockfilePath?: string | undefined
  /** Where the trust guard records its own decisions. */
  readonly audit?: AuditSink | undefined
  /** How refusals and quarantines spell the commands they suggest (the CLI adds --config). */
  readonly hint?: CommandHint
  /** Floating versions allowed for every upstream, whatever its policy (`--allow-floating`). */
  readonly allowFloating?: boolean
  /** Names today's version in a floating-version refusal; absent: an example version. */
  readonly resolveVersion?: VersionResolver
}

/** The policy of one upstream: its `trust:` or the defaults. */
export function trustPolicyOf(u: UpstreamConfig): TrustPolicy {
  return u.trust ?? DEFAULT_TRUST_POLICY
}

/** Where the store lives: the configured one, or the SQLite file beside the config file. */
export function storeConfigOf(config: Config, configPath: string | undefined): StoreConfig {
  if (config.store) return config.store
  const base = configPath === undefined ? process.cwd() : dirname(configPath)
  return { kind: 'sqlite', path: join(base, DEFAULT_STORE_PATH) }
}

/** Opens the store a configuration names. */
export async function openStore(config: Config, configPath: string | undefined): Promise<Store> {
  const store = storeConfigOf(config, configPath)
  if (store.kind === 'memory') return memoryStore()
  if (store.kind === 'postgres') {
    // Loaded here only: an embedded installation never reads the pg package (ADR 055).
    const { openPostgresStore } = await import('../store/postgres.ts')
    return await openPostgresStore(store.url, { migrate: store.migrate })
  }
  return await openSqliteStore(store.path)
}

/** `barbican.lock` beside the config file (the working directory for the embedded demo). */
export function lockfilePathOf(configPath: string | undefined): string {
  return join(configPath === undefined ? process.cwd() : dirname(configPath), LOCKFILE_NAME)
}

/** The plan with the pin guard installed and every stdio launch checked first. */
export function withTrust(
  plan: GatewayPlan,
  config: Config,
  setup: TrustSetup,
  log: Logger,
): GatewayPlan {
  const policies = new Map(config.upstreams.map((u) => [u.name, trustPolicyOf(u)]))
  const trust = new TrustGuard({
    store: setup.store.pins,
    policies,
    log: log.child({ part: 'trust' }),
    audit: setup.audit,
    ...(setup.hint ? { hint: setup.hint } : {}),
  })
  const byName = new Map(config.upstreams.map((u) => [u.name, u]))
  return {
    ...plan,
    trust,
    upstreams: plan.upstreams.map((p): UpstreamPlan => {
      const u = byName.get(p.name)
      if (u?.transport === 'wasm') {
        const wasmLog = log.child({ part: 'upstream', upstream: u.name })
        return {
          ...p,
          createTransport: () => pinnedWasm(u, setup.lockfilePath, config, wasmLog),
        }
      }
      if (u?.transport !== 'stdio') return p
      const installLog = log.child({ part: 'upstream', upstream: u.name })
      return {
        ...p,
        createTransport: () =>
          withInstall(u, setup, installLog, () => checkedLaunch(u, setup, p.createTransport)),
      }
    }),
  }
}

/**
 * A confined `npx PACKAGE@X.Y.Z` whose package is not installed yet: installed first, outside
 * the sandbox, into Barbican's package cache (src/sandbox/npm-install.ts, ADR 043), then checked
 * against barbican.lock and launched as usual. Anything else is launched as it is.
 */
function withInstall(
  u: Extract<UpstreamConfig, { transport: 'stdio' }>,
  setup: TrustSetup,
  log: Logger,
  launch: () => Transport,
): Transport {
  const sandbox = u.sandbox
  if (sandbox === 'none' || sandbox.packageCache === undefined) return launch()
  const cache = sandbox.packageCache
  if (basename(u.command) === 'uvx' && findExecutable('uv', u.env.PATH) === undefined) {
    // PyPI packages are not installed by Barbican; without uv there is nothing to run them.
    return refusedTransport(
      new BarbicanError(
        'ERR_LAUNCH_REFUSED',
        `upstream "${u.name}": a confined uvx launch runs from uv's cache with no network, ` +
          'but this host has no uv; install uv and fill its cache outside the sandbox ' +
          '(uvx PACKAGE==VERSION --help once), or set sandbox: none (docs/sandbox.md)',
      ),
    )
  }
  const pkg = npxPackageOf(u.command, u.args)
  if (pkg === undefined) return launch()
  const context = {
    cwd: u.cwd ?? process.cwd(),
    home: u.env.HOME ?? process.env.HOME,
    packageCache: cache,
  }
  const found = findNpmPackage(pkg.name, pkg.version, context)
  const ready = found !== undefined && installedVersion(found) === pkg.version
  // A package installed elsewhere (the project's node_modules, npx's cache) is the user's own.
  if (ready && !inCacheSlot(found, cache, pkg.name, pkg.version)) return launch()
  const lock = () =>
    setup.lockfilePath === undefined ? undefined : readLockfile(setup.lockfilePath)
  const allowScripts = (): AllowScripts =>
    scriptsAllowed(lock(), u.name) ? true : (trustPolicyOf(u).allowScripts ?? [])
  const slot = cacheSlot(cache, pkg.name, pkg.version)
  // A server that dies for want of a skipped native build says only what it searched for.
  const note = () => skippedScriptsMessage(u.name, scriptsRecord(slot))?.message
  const prepare = async () => {
    const allow = allowScripts()
    if (!ready || needsScripts(slot, allow)) {
      log.info(
        ready ? 'running allowed install scripts' : 'installing the package outside the sandbox',
        { package: `${pkg.name}@${pkg.version}`, cache, allowScripts: allow },
      )
      await installNpmPackage(cache, pkg.name, pkg.version, { allowScripts: allow })
    }
    warnSkipped(u.name, scriptsRecord(slot), log)
  }
  return new DeferredTransport(prepare, launch, note)
}

/**
 * Says, at each launch, which packages' install scripts were skipped and the line that runs
 * them: at warn until the operator has allowed some (then the rest is their choice: info).
 */
function warnSkipped(upstream: string, record: ScriptsRecord, log: Logger): void {
  const skipped = skippedScriptsMessage(upstream, record)
  if (skipped === undefined) return
  const level = record.ran.length === 0 ? 'warn' : 'info'
  log[level]('install scripts not run', {
    packages: skipped.packages,
    fix: skipped.fix,
    detail: skipped.message,
  })
}

function installedVersion(dir: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string })
      .version
  } catch {
    return undefined
  }
}

/** Runs the launch check; a refusal becomes a transport that fails to start with it. */
function checkedLaunch(
  u: Extract<UpstreamConfig, { transport: 'stdio' }>,
  setup: TrustSetup,
  create: () => Transport,
): Transport {
  try {
    // Read at every launch, so `barbican lock` takes effect at the next restart.
    const lock = setup.lockfilePath === undefined ? undefined : readLockfile(setup.lockfilePath)
    const policy = trustPolicyOf(u)
    checkLaunch(u.name, u, {
      allowFloating: setup.allowFloating === true || policy.allowFloating,
      allowInlineCode: policy.allowInlineCode,
      lock,
      context: {
        cwd: u.cwd ?? process.cwd(),
        home: u.env.HOME ?? process.env.HOME,
        ...(u.sandbox === 'none' ? {} : { packageCache: u.sandbox.packageCache }),
      },
      ...(setup.hint ? { hint: setup.hint } : {}),
    })
  } catch (err) {
    return refusedTransport(toBarbicanError(err), setup.resolveVersion)
  }
  return create()
}

/**
 * A Wasm upstream is loaded only with the SHA-256 `barbican.lock` pins for it (ADR 036); the
 * transport refuses a module without a pin, or with other bytes, before instantiating it.
 */
function pinnedWasm(
  u: Extract<UpstreamConfig, { transport: 'wasm' }>,
  lockfilePath: string | undefined,
  config: Config,
  log: Logger,
): Transport {
  let sha256: string | undefined
  try {
    // Read at every start, so `barbican lock` takes effect at the next restart.
    const entry =
      lockfilePath === undefined ? undefined : readLockfile(lockfilePath)?.upstreams[u.name]
    if (entry !== undefined && (entry.runner !== 'wasm' || entry.path !== u.source)) {
      throw new BarbicanError(
        'ERR_LAUNCH_REFUSED',
        `barbican.lock pins ${entry.path ?? entry.package ?? entry.runner} for "${u.name}", ` +
          `but the config names ${u.source}; run \`barbican lock\``,
      )
    }
    sha256 = entry?.sha256
  } catch (err) {
    return refusedTransport(toBarbicanError(err))
  }
  return createOutboundTransport({ ...u, sha256 }, { name: u.name, log, limits: config.limits })
}

/**
 * A floating-version refusal names the version to pin: the one the package resolves to today.
 * Resolved when the transport starts, which is already asynchronous and fails anyway.
 */
async function withTodaysVersion(
  error: BarbicanError,
  resolve: VersionResolver | undefined,
): Promise<BarbicanError> {
  const floating = (error.data as LaunchRefusal | undefined)?.floating
  if (floating?.ecosystem !== 'npm' || !resolve) return error
  const today = await resolve(floating.name).catch(() => undefined)
  if (!today) return error
  const exact = `${floating.name}@${today.version}`
  return new BarbicanError(
    error.code,
    error.message.replace(
      `(e.g. ${floating.example})`,
      `(today ${exact}, from the ${today.source}: write ${exact})`,
    ),
    { data: { ...floating, ...(error.data as object), resolved: today.version } },
  )
}

/** A transport whose start fails with `error`: how a launch refusal reaches the upstream. */
export function refusedTransport(error: BarbicanError, resolve?: VersionResolver): Transport {
  let named: Promise<BarbicanError> | undefined
  return {
    start: async () => {
      named ??= withTodaysVersion(error, resolve)
      throw await named
    },
    send: () => Promise.reject(error),
    close: () => Promise.resolve(),
  }
}
