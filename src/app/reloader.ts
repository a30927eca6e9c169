/**
 * Hot reload of `barbican serve`'s config file (docs/configuration.md#reload, ADR 037): on a
 * change to the file or to a Cedar policy file it names (fs.watch on its folder, debounced, with a stat poll for filesystems
 * where watching misses changes), on SIGHUP, and on `POST /admin/api/reload`. The new file is
 * loaded and validated first; when that fails the running configuration keeps serving and the
 * error is logged. One reload runs at a time; a request during one runs once it ends.
 */
import {
  type FSWatcher,
  readFileSync,
  type StatsListener,
  unwatchFile,
  watch,
  watchFile,
} from 'node:fs'
import { basename, dirname } from 'node:path'
import type { Config } from '../config/config.ts'
import type { ConfigDiff } from '../gateway/reload.ts'
import type { Logger } from '../telemetry/log.ts'

export interface ReloadOutcome {
  readonly at: string
  /** `file`, `SIGHUP` or `admin`. */
  readonly trigger: string
  readonly ok: boolean
  /** Why the new configuration was refused (the running one keeps serving). */
  readonly error?: string | undefined
  readonly diff?: ConfigDiff | undefined
  readonly needsRestart?: readonly string[] | undefined
}

export interface ReloaderOptions {
  readonly path: string
  /** Loads and validates the file (the CLI's loadForCommand, in the config worker). */
  readonly load: () => Promise<{ readonly config: Config } | { readonly error: string }>
  /** Applies the difference to the running gateway. */
  readonly apply: (next: Config) => Promise<ConfigDiff>
  readonly log: Logger
  /** Quiet time after the last change event before the file is read (editors write in steps). */
  readonly debounceMs: number
  /** How often the file's mtime and size are polled as a fallback to fs.watch; 0: never. */
  readonly pollMs: number
  /** Told every outcome (the audit log records each reload). */
  readonly onReloaded?: (outcome: ReloadOutcome) => unknown
  /**
   * Other files the configuration reads (its Cedar policy files): an edit to one reloads too.
   * Those named when watching starts are watched (their folder, if it is the file's) and polled.
   */
  readonly alsoRead?: (() => readonly string[]) | undefined
}

export class ConfigReloader {
  #options: ReloaderOptions
  #watcher: FSWatcher | undefined
  #poll: StatsListener | undefined
  /** The files polled besides the config file (alsoRead, when watching started). */
  #polled: readonly string[] = []
  #timer: NodeJS.Timeout | undefined
  #running: Promise<ReloadOutcome> | undefined
  #again: Promise<ReloadOutcome> | undefined
  /** The file's text as last read: the watch and the poll both see one edit, reloaded once. */
  #seen: string | undefined
  /** What the last reload did, for the overview. */
  last: ReloadOutcome | undefined

  constructor(options: ReloaderOptions) {
    this.#options = options
  }

  /** Starts watching the file (changes only; SIGHUP and the admin API call `reload`). */
  watch(): void {
    const { path, pollMs } = this.#options
    const others = this.#options.alsoRead?.() ?? []
    const names = new Set([
      basename(path),
      ...others.filter((f) => dirname(f) === dirname(path)).map((f) => basename(f)),
    ])
    this.#seen = this.#read()
    try {
      // The folder, not the file: editors and `mv` replace the file, which a file watch loses.
      this.#watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
        if (file === null || names.has(file)) this.#schedule()
      })
      this.#watcher.on('error', (error) => {
        this.#options.log.warn('config file watch failed; polling only', { error })
        this.#watcher?.close()
        this.#watcher = undefined
      })
    } catch (error) {
      this.#options.log.warn('cannot watch the config file; polling only', { error })
    }
    if (pollMs > 0) {
      this.#poll = (now, before) => {
        if (now.mtimeMs !== before.mtimeMs || now.size !== before.size) this.#schedule()
      }
      this.#polled = [path, ...others]
      for (const file of this.#polled) {
        watchFile(file, { interval: pollMs, persistent: false }, this.#poll)
      }
    }
  }

  stop(): void {
    clearTimeout(this.#timer)
    this.#watcher?.close()
    if (this.#poll) for (const file of this.#polled) unwatchFile(file, this.#poll)
  }

  /** The config file's text and the texts of the files it reads, as they are now. */
  #read(): string | undefined {
    const text = readText(this.#options.path)
    const others = this.#options.alsoRead?.() ?? []
    if (text === undefined || others.length === 0) return text
    return [text, ...others.map((f) => `${f}\0${readText(f) ?? ''}`)].join('\0')
  }

  #schedule(): void {
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => {
      const text = this.#read()
      if (text === this.#seen) return
      void this.reload('file')
    }, this.#options.debounceMs)
    this.#timer.unref()
  }

  /** Reloads now; a reload asked for while one runs runs once more after it. */
  reload(trigger: string): Promise<ReloadOutcome> {
    if (!this.#running) {
      this.#running = this.#reload(trigger).finally(() => {
        this.#running = undefined
      })
      return this.#running
    }
    this.#again ??= this.#running.then(() => {
      this.#again = undefined
      return this.reload(trigger)
    })
    return this.#again
  }

  async #reload(trigger: string): Promise<ReloadOutcome> {
    const { log, path } = this.#options
    const at = new Date().toISOString()
    this.#seen = this.#read()
    let outcome: ReloadOutcome
    const loaded = await this.#options.load()
    if ('error' in loaded) {
      outcome = { at, trigger, ok: false, error: loaded.error }
      log.error(`config reload refused; the running configuration keeps serving: ${loaded.error}`, {
        trigger,
        path,
      })
    } else {
      try {
        const diff = await this.#options.apply(loaded.config)
        outcome = { at, trigger, ok: true, diff, needsRestart: diff.needsRestart }
        log.info(`config reloaded: ${describeDiff(diff)}`, { trigger, path, diff })
        if (diff.needsRestart.length > 0) {
          log.warn(`config changes that need a restart: ${diff.needsRestart.join(', ')}`, {
            needsRestart: diff.needsRestart,
          })
        }
      } catch (err) {
        const error = (err as Error).message
        outcome = { at, trigger, ok: false, error }
        log.error(`config reload failed: ${error}`, { trigger, path })
      }
    }
    this.last = outcome
    try {
      await this.#options.onReloaded?.(outcome)
    } catch (error) {
      log.error('recording the config reload failed', { error })
    }
    return outcome
  }
}

/** The file's text, or undefined while it cannot be read (being replaced, removed). */
function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

/** One line for a log: what the reload changed. */
export function describeDiff(diff: ConfigDiff): string {
  const parts: string[] = []
  const { added, removed, changed } = diff.upstreams
  if (added.length > 0) parts.push(`upstreams added: ${added.join(', ')}`)
  if (removed.length > 0) parts.push(`upstreams removed: ${removed.join(', ')}`)
  if (changed.length > 0) parts.push(`upstreams restarted: ${changed.join(', ')}`)
  if (diff.servers.length > 0) parts.push(`virtual servers updated: ${diff.servers.join(', ')}`)
  if (diff.policies.length > 0) parts.push(`policies updated: ${diff.policies.join(', ')}`)
  return parts.length > 0 ? parts.join('; ') : 'nothing to apply'
}
