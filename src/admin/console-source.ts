/**
 * What the admin console reads and changes, assembled from the running gateway's parts: the
 * overview, catalogs with pin states and token costs, the pin store, the audit log, API keys
 * (where `barbican keys` keeps them: PostgreSQL with a PostgreSQL store, else the keys file the
 * configuration names, else in memory until restart) and linked accounts.
 */
import type { AuditLog } from '../audit/audit-log.ts'
import { type ApiKeyEntry, type ApiKeyStore, issueApiKey } from '../auth/api-keys.ts'
import { type ApiKeyFileEntry, readKeysFile, writeKeysFile } from '../auth/api-keys-file.ts'
import { BarbicanError } from '../common/errors.ts'
import type { Config } from '../config/config.ts'
import type { TokenStore } from '../credentials/token-store.ts'
import type { Gateway } from '../gateway/gateway.ts'
import {
  catalogWithin,
  exposedTools,
  OVERVIEW_LIST_WAIT_MS,
  type Overview,
} from '../gateway/overview.ts'
import type { SharedApiKeys } from '../gateway/shared-api-keys.ts'
import { serverCosts } from '../gateway/token-budget.ts'
import { describeConfinement } from '../sandbox/confine.ts'
import type { PinStore } from '../store/store.ts'
import { quarantineKey } from '../trust/quarantine.ts'
import { CallFigures } from './call-figures.ts'
import type { ConsoleAccounts, ConsoleKeys, ConsoleSource } from './console.ts'
import type { KeyRow, ServerPageEntry, ServerToolRow } from './pages.ts'

export interface ConsoleParts {
  readonly gateway: Gateway
  readonly config: () => Config
  readonly overview: () => Promise<Overview>
  readonly pins: PinStore
  readonly audit: AuditLog | undefined
  readonly apiKeys: ApiKeyStore | undefined
  /** The keys in PostgreSQL, once the replica follows them (`store.postgres`). */
  readonly sharedKeys: () => SharedApiKeys | undefined
  readonly accounts: ConsoleAccounts | undefined
  readonly reload: ConsoleSource['reload']
}

export function consoleSource(parts: ConsoleParts): ConsoleSource {
  const { gateway, pins } = parts
  return {
    overview: parts.overview,
    sandboxes: () =>
      new Map(
        parts
          .config()
          .upstreams.filter((u) => u.transport === 'stdio')
          .map((u) => [u.name, describeConfinement(u.name, u.sandbox, u.command)]),
      ),
    servers: () => serverEntries(gateway, parts.config(), pins),
    pins,
    refreshTrust: async () => {
      await Promise.all([...gateway.servers.values()].map((s) => s.refreshTrust()))
      gateway.onTrustDecision?.()
    },
    audit: parts.audit,
    keys: parts.apiKeys ? consoleKeys(parts.apiKeys, parts) : undefined,
    accounts: parts.accounts,
    figures: new CallFigures(gateway.metrics),
    reload: parts.reload,
  }
}

async function serverEntries(
  gateway: Gateway,
  config: Config,
  pins: PinStore,
): Promise<ServerPageEntry[]> {
  const entries: ServerPageEntry[] = []
  for (const s of config.servers) {
    const view = await catalogWithin(gateway, s.name, OVERVIEW_LIST_WAIT_MS)
    if (!view) {
      entries.push({
        name: s.name,
        path: s.path,
        tools: undefined,
        total: undefined,
        budget: s.tokenBudget,
        over: undefined,
      })
      continue
    }
    const costs = await serverCosts(gateway, config, s.name)
    const pinned = new Set<string>()
    const pending = new Set<string>()
    for (const upstream of s.upstreams) {
      for (const p of await pins.pinned(upstream)) pinned.add(`${upstream}\n${p.key}`)
      for (const p of await pins.pending(upstream)) pending.add(`${upstream}\n${p.key}`)
    }
    const tools: ServerToolRow[] = exposedTools(view.catalog).map((t) => {
      const key = `${t.upstream}\ntool:${t.original}`
      return {
        ...t,
        pin: pending.has(key) ? 'pending' : pinned.has(key) ? 'pinned' : 'unpinned',
        tokens: costs?.tools.get(t.name),
      }
    })
    const exposedPrefix = quarantineKey('tool', '')
    for (const [exposed, q] of view.quarantined) {
      if (q.kind !== 'tool' || !exposed.startsWith(exposedPrefix)) continue
      tools.push({
        name: exposed.slice(exposedPrefix.length),
        upstream: q.upstream,
        original: q.key.replace(/^tool:/, ''),
        pin: 'quarantined',
        tokens: undefined,
      })
    }
    entries.push({
      name: s.name,
      path: s.path,
      tools,
      total: costs?.total,
      budget: s.tokenBudget,
      over: costs?.over,
    })
  }
  return entries
}

/** Users' linked accounts, from the token store of the moment (a reload may add one). */
export function linkedAccounts(store: () => TokenStore | undefined): ConsoleAccounts {
  return {
    list: async () => await store()?.links(),
    async revoke(account) {
      const tokens = store()
      if (!tokens) throw new BarbicanError('ERR_INVALID_PARAMS', 'No upstream links accounts')
      await tokens.delete(account)
    },
  }
}

/**
 * The console's key actions go where `barbican keys` puts keys: PostgreSQL with a PostgreSQL
 * store (every replica follows it), else the keys file, else the running store (until restart).
 */
function consoleKeys(store: ApiKeyStore, parts: ConsoleParts): ConsoleKeys {
  const local = localKeys(store, parts.config().auth?.apiKeys?.file)
  const configured = () => {
    const shared = new Set(store.sharedEntries().map((e) => e.id))
    return store.entries().filter((e) => !shared.has(e.id))
  }
  return {
    async list() {
      const shared = parts.sharedKeys()
      if (shared === undefined) return await local.list()
      return [
        ...configured().map((e): KeyRow => ({ ...e, origin: 'config' })),
        ...(await shared.list()).map((e): KeyRow => ({ ...e, origin: 'postgres' })),
      ]
    },
    async create(entry) {
      const shared = parts.sharedKeys()
      if (shared === undefined) return await local.create(entry)
      const { key, entry: stored } = issueApiKey(entry)
      if (configured().some((e) => e.id === entry.id) || !(await shared.create(stored))) {
        throw new BarbicanError('ERR_INVALID_PARAMS', `A key "${entry.id}" exists already`)
      }
      return key
    },
    async revoke(id) {
      const shared = parts.sharedKeys()
      if (shared === undefined) return await local.revoke(id)
      if (await shared.revoke(id)) return true
      if (configured().some((e) => e.id === id)) {
        throw new BarbicanError(
          'ERR_INVALID_PARAMS',
          `Key "${id}" is listed in the configuration; remove it there and reload`,
        )
      }
      return false
    },
  }
}

/** Keys of the keys file (written like `barbican keys`), else added to the running store. */
function localKeys(store: ApiKeyStore, file: string | undefined): ConsoleKeys {
  const added = new Map<string, ApiKeyEntry & { createdAt: string }>()
  const revoked = new Set<string>()
  const fileKeys = (): ApiKeyFileEntry[] =>
    file === undefined ? [] : readKeysFile(file, { missing: 'empty' })
  const configured = () => {
    const inFile = new Set(fileKeys().map((k) => k.id))
    return store.entries().filter((e) => !inFile.has(e.id) && !added.has(e.id))
  }
  return {
    list: async (): Promise<KeyRow[]> => [
      ...configured()
        .filter((e) => !revoked.has(e.id))
        .map((e): KeyRow => ({ ...e, origin: 'config' })),
      ...fileKeys().map((e): KeyRow => ({ ...e, origin: 'file' })),
      ...[...added.values()]
        .filter((e) => !revoked.has(e.id))
        .map((e): KeyRow => ({ ...e, origin: 'console' })),
    ],
    async create({ id, subject, scopes }) {
      if (store.entries().some((e) => e.id === id && !revoked.has(e.id))) {
        throw new BarbicanError('ERR_INVALID_PARAMS', `A key "${id}" exists already`)
      }
      const { key, entry } = issueApiKey({ id, subject, scopes })
      if (file !== undefined) writeKeysFile(file, [...fileKeys(), entry])
      else {
        store.add(entry)
        added.set(id, entry)
        revoked.delete(id)
      }
      return key
    },
    async revoke(id) {
      const keys = fileKeys()
      if (keys.some((k) => k.id === id)) {
        writeKeysFile(
          file!,
          keys.filter((k) => k.id !== id),
        )
        return true
      }
      if (added.has(id) && !revoked.has(id)) {
        store.revoke(id)
        revoked.add(id)
        return true
      }
      if (configured().some((e) => e.id === id)) {
        throw new BarbicanError(
          'ERR_INVALID_PARAMS',
          `Key "${id}" is listed in the configuration; remove it there and reload`,
        )
      }
      return false
    },
  }
}
