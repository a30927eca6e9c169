/**
 * The API keys file (`auth.apiKeys.file`): reading it strictly, for `barbican check` and
 * `barbican keys`, and rewriting it atomically. The gateway itself reads the same file leniently
 * (src/auth/api-keys.ts: a broken file grants nothing); here every fault is named, so an operator
 * learns about it before a holder's key is refused.
 *
 * Writes go to a temporary file in the same directory, then rename over the old one: a gateway
 * re-reading the file sees the old list or the new one, never half of one, and the new inode
 * tells it the file changed even within one mtime tick. The file holds only hashes, but it
 * decides who gets in, so it is written readable by its owner only.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import type { ApiKeyEntry } from './api-keys.ts'

/** One key as the file holds it: an ApiKeyEntry and when `barbican keys create` made it. */
export interface ApiKeyFileEntry extends ApiKeyEntry {
  readonly createdAt?: string | undefined
}

/** A keys file that cannot be used, with every reason. */
export class KeysFileError extends Error {
  override readonly name = 'KeysFileError'
  readonly code = 'ERR_KEYS_FILE'
  readonly problems: readonly string[]

  constructor(file: string, problems: readonly string[]) {
    super(`${file}: ${problems.join('; ')}`)
    this.problems = problems
  }
}

const HASH = /^sha256:[0-9a-f]{64}$/i

/**
 * The keys of the file, or KeysFileError naming each fault (missing file, not JSON, an entry
 * without id, subject or a well-formed hash, an id used twice). `missing: 'empty'` reads a
 * missing file as holding no keys (`barbican keys create` starts a new file).
 */
export function readKeysFile(
  file: string,
  options: { readonly missing?: 'error' | 'empty' } = {},
): ApiKeyFileEntry[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' && options.missing === 'empty') return []
    throw new KeysFileError(file, [
      code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? (err as Error).message})`,
    ])
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new KeysFileError(file, [`is not JSON (${(err as Error).message})`])
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys
  if (typeof parsed !== 'object' || parsed === null || !Array.isArray(keys)) {
    throw new KeysFileError(file, ['must be an object {"keys": [...]}'])
  }
  const problems: string[] = []
  const seen = new Set<string>()
  keys.forEach((value: unknown, i: number) => {
    const entry = value as Record<string, unknown> | null
    const at = `keys[${i}]`
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      problems.push(`${at} is not an object`)
      return
    }
    if (typeof entry.id !== 'string' || entry.id === '') problems.push(`${at}.id is missing`)
    else if (seen.has(entry.id)) problems.push(`${at}.id "${entry.id}" is used twice`)
    else seen.add(entry.id)
    if (typeof entry.subject !== 'string' || entry.subject === '')
      problems.push(`${at}.subject is missing`)
    if (typeof entry.hash !== 'string' || !HASH.test(entry.hash))
      problems.push(`${at}.hash must be "sha256:" and 64 hex digits`)
    if (entry.tenant !== undefined && typeof entry.tenant !== 'string')
      problems.push(`${at}.tenant must be a string`)
    if (
      entry.scopes !== undefined &&
      !(Array.isArray(entry.scopes) && entry.scopes.every((s) => typeof s === 'string'))
    )
      problems.push(`${at}.scopes must be a list of strings`)
  })
  if (problems.length > 0) throw new KeysFileError(file, problems)
  return keys as ApiKeyFileEntry[]
}

/** Replaces the file's keys at once (temporary file and rename), readable by its owner only. */
export function writeKeysFile(file: string, keys: readonly ApiKeyFileEntry[]): void {
  const temp = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString('hex')}.tmp`)
  try {
    writeFileSync(temp, `${JSON.stringify({ keys }, null, 2)}\n`, { mode: 0o600, flag: 'wx' })
    renameSync(temp, file)
  } catch (err) {
    rmSync(temp, { force: true })
    throw err
  }
}
