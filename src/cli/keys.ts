/**
 * `barbican keys create|list|revoke`: API keys kept in the keys file the configuration names
 * (`auth.apiKeys.file`), or in PostgreSQL when the store is there (shared by the fleet). A new key is printed once and only its hash is written; a running
 * gateway re-reads the file on the next request, so a revoked key stops working there at once.
 * Keys listed in the configuration itself are shown but never edited: the command does not
 * rewrite the operator's YAML.
 */

import { API_KEYS_CHANGED, tellFleet } from '../app/fleet.ts'
import type { AdminEvent } from '../audit/record.ts'
import type { ApiKeyEntry } from '../auth/api-keys.ts'
import { issueApiKey } from '../auth/api-keys.ts'
import { readKeysFile, writeKeysFile } from '../auth/api-keys-file.ts'
import type { LoadedConfig } from '../config/config.ts'
import { openAuditLog } from '../gateway/audit-setup.ts'
import { PostgresApiKeys } from '../store/postgres-api-keys.ts'
import { silentLogger } from '../telemetry/log.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'
import { actorOf } from './pins.ts'

/** Key ids appear in logs, audit records and `client` of identities: keep them plain. */
const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export async function runKeys(
  options: CommandOptions,
  args: readonly string[],
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, false),
): Promise<number> {
  const [action, id, extra] = args
  if (action !== 'create' && action !== 'list' && action !== 'revoke') {
    io.stderr(
      `barbican: ${action === undefined ? 'keys needs an action' : `unknown keys action "${action}"`} (create, list, revoke)\n`,
    )
    return 2
  }
  if (extra !== undefined || (action === 'list' && id !== undefined)) {
    io.stderr(`barbican: unexpected argument "${extra ?? id}"\n`)
    return 2
  }
  if (action !== 'list' && id === undefined) {
    io.stderr(`barbican: keys ${action} needs the key's ID (e.g. barbican keys ${action} ci-bot)\n`)
    return 2
  }
  const loaded = await loading
  if (!loaded) return 1
  const apiKeys = loaded.config.auth?.apiKeys
  const configured: readonly ApiKeyEntry[] = apiKeys?.keys ?? []
  const store = loaded.config.store
  if (store?.kind === 'postgres')
    return await runPostgresKeys(store.url, action, id, configured, loaded, options, io)
  const file = apiKeys?.file
  try {
    if (action === 'list') {
      const fromFile = file === undefined ? [] : readKeysFile(file, { missing: 'empty' })
      for (const k of configured) io.stdout(`${describe(k)}  (in the configuration)\n`)
      for (const k of fromFile)
        io.stdout(`${describe(k)}${k.createdAt ? `  created ${k.createdAt}` : ''}\n`)
      if (configured.length + fromFile.length === 0) io.stdout('no API keys\n')
      return 0
    }
    const keyId = id as string
    if (file === undefined) {
      io.stderr(
        `barbican: the configuration names no keys file; add one, then run this again:\n` +
          '  auth:\n    apiKeys:\n      file: ./barbican-keys.json\n',
      )
      return 1
    }
    const keys = readKeysFile(file, { missing: 'empty' })
    if (action === 'create') {
      if (!KEY_ID.test(keyId)) {
        io.stderr(
          `barbican: key ID "${keyId.slice(0, 80)}" must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit\n`,
        )
        return 2
      }
      if (configured.some((k) => k.id === keyId) || keys.some((k) => k.id === keyId)) {
        io.stderr(
          `barbican: a key "${keyId}" exists already; revoke it first or choose another ID\n`,
        )
        return 1
      }
      const { key, entry } = issueApiKey({
        id: keyId,
        subject: options.subject ?? keyId,
        tenant: options.tenant,
        scopes: options.scopes,
      })
      writeKeysFile(file, [...keys, entry])
      if (!(await recorded(loaded, options, { action: 'key.create', target: keyId }, io))) {
        writeKeysFile(file, keys)
        return 1
      }
      io.stderr(
        `created ${describe(entry)} in ${file}\nThe key is shown once; give it to its holder:\n`,
      )
      // The key alone on stdout, so `barbican keys create ci > key.txt` captures just the key.
      io.stdout(`${key}\n`)
      return 0
    }
    const kept = keys.filter((k) => k.id !== keyId)
    if (kept.length === keys.length) {
      io.stderr(
        configured.some((k) => k.id === keyId)
          ? `barbican: key "${keyId}" is listed in the configuration, not in ${file}; remove it there and restart\n`
          : `barbican: no key "${keyId}" in ${file}\n`,
      )
      return 1
    }
    writeKeysFile(file, kept)
    // A revocation stands even when it cannot be recorded: undoing it would re-enable the key.
    if (!(await recorded(loaded, options, { action: 'key.revoke', target: keyId }, io))) return 1
    io.stdout(`revoked ${keyId}: a running gateway refuses it from its next request\n`)
    return 0
  } catch (err) {
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 1
  }
}

/**
 * The same actions on the keys in PostgreSQL (`store: { postgres: … }`), shared by every
 * replica: a change is told to the fleet on its bus (Redis configured), and replicas also poll
 * the table, so a revoked key is refused everywhere within a second.
 */
async function runPostgresKeys(
  url: string,
  action: 'create' | 'list' | 'revoke',
  id: string | undefined,
  configured: readonly ApiKeyEntry[],
  loaded: LoadedConfig,
  options: CommandOptions,
  io: CliIo,
): Promise<number> {
  const { openPostgresPool } = await import('../store/postgres.ts')
  let pool: Awaited<ReturnType<typeof openPostgresPool>>
  try {
    pool = await openPostgresPool(url, { maxConnections: 1 })
  } catch (err) {
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 1
  }
  const table = new PostgresApiKeys(pool)
  try {
    if (action === 'list') {
      const stored = await table.list()
      for (const k of configured) io.stdout(`${describe(k)}  (in the configuration)\n`)
      for (const k of stored) io.stdout(`${describe(k)}  created ${k.createdAt}\n`)
      if (configured.length + stored.length === 0) io.stdout('no API keys\n')
      return 0
    }
    const keyId = id as string
    if (action === 'create') {
      if (!KEY_ID.test(keyId)) {
        io.stderr(
          `barbican: key ID "${keyId.slice(0, 80)}" must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit\n`,
        )
        return 2
      }
      const { key, entry } = issueApiKey({
        id: keyId,
        subject: options.subject ?? keyId,
        tenant: options.tenant,
        scopes: options.scopes,
      })
      if (configured.some((k) => k.id === keyId) || !(await table.create(entry))) {
        io.stderr(
          `barbican: a key "${keyId}" exists already; revoke it first or choose another ID\n`,
        )
        return 1
      }
      if (!(await recorded(loaded, options, { action: 'key.create', target: keyId }, io))) {
        await table.revoke(keyId)
        return 1
      }
      await tellFleet(loaded.config.redis, API_KEYS_CHANGED, io.stderr)
      io.stderr(
        `created ${describe(entry)} in PostgreSQL\nThe key is shown once; give it to its holder:\n`,
      )
      io.stdout(`${key}\n`)
      return 0
    }
    if (!(await table.revoke(keyId))) {
      io.stderr(
        configured.some((k) => k.id === keyId)
          ? `barbican: key "${keyId}" is listed in the configuration, not in PostgreSQL; remove it there and restart\n`
          : `barbican: no key "${keyId}" in PostgreSQL\n`,
      )
      return 1
    }
    await tellFleet(loaded.config.redis, API_KEYS_CHANGED, io.stderr)
    // A revocation stands even when it cannot be recorded: undoing it would re-enable the key.
    if (!(await recorded(loaded, options, { action: 'key.revoke', target: keyId }, io))) return 1
    io.stdout(`revoked ${keyId}: every replica refuses it within a second\n`)
    return 0
  } catch (err) {
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 1
  } finally {
    await pool.end().catch(() => {})
  }
}

/** Records a key's creation or revocation in the audit log; false (said on stderr) if not. */
async function recorded(
  loaded: LoadedConfig,
  options: CommandOptions,
  act: Pick<AdminEvent, 'action' | 'target'>,
  io: CliIo,
): Promise<boolean> {
  try {
    const audit = await openAuditLog(loaded.config, loaded.source.path, {
      log: silentLogger,
      running: false,
      stdoutFree: true,
    })
    try {
      await audit?.record({ type: 'admin', actor: actorOf(options), outcome: 'ok', ...act })
    } finally {
      await audit?.close()
    }
    return true
  } catch (err) {
    io.stderr(`barbican: ${act.action} not recorded in the audit log: ${(err as Error).message}\n`)
    return false
  }
}

function describe(k: ApiKeyEntry): string {
  const scopes = k.scopes && k.scopes.length > 0 ? ` scopes ${k.scopes.join(' ')}` : ''
  return `${k.id}  subject ${k.subject}${k.tenant ? ` tenant ${k.tenant}` : ''}${scopes}  ${k.hash.slice(0, 19)}…`
}
