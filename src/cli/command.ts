/**
 * What every `barbican` subcommand receives: the shared options and where to write. Kept apart
 * from main.ts so that the commands, which main.ts imports, never import main.ts back.
 */

import { didYouMean } from '../common/suggest.ts'
import type { CommandHint } from '../trust/command-hint.ts'
import { npmResolver, type VersionResolver } from '../trust/registry-version.ts'

export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  /** All of stdin, at most `maxBytes` (`barbican seal`); absent: the process's stdin. */
  readonly stdin?: (maxBytes: number) => Promise<string>
  /**
   * Asks the person at the terminal and returns the answer; absent when there is no terminal
   * (stdin is not a TTY), where commands do not ask.
   */
  readonly ask?: ((question: string) => Promise<string>) | undefined
}

/** Options every command shares. */
export interface CommandOptions {
  readonly config?: string | undefined
  readonly listen?: string | undefined
  readonly server?: string | undefined
  readonly allowInsecureNonLoopback: boolean
  /** `pins approve|reject UPSTREAM --all`. */
  readonly all?: boolean
  /** Who decides, for `pins` (`--as NAME`); default: the login name. */
  readonly actor?: string | undefined
  /** `keys create`: the subject, tenant and scopes of the new key. */
  readonly subject?: string | undefined
  readonly tenant?: string | undefined
  readonly scopes?: readonly string[] | undefined
  /** `seal`: the slot the secret is for. */
  readonly upstream?: string | undefined
  readonly header?: string | undefined
  readonly env?: string | undefined
  /** `check --pins`: also compare what upstreams advertise with the approved pins. */
  readonly pins?: boolean
  /** `--allow-floating`: unversioned packages may launch, for this run only. */
  readonly allowFloating?: boolean
  /** `--strict`: a `${VAR}` not set is an error, not a held-back upstream entry (ADR 121). */
  readonly strict?: boolean
  /** `status --url`: the running gateway's address (default: the config's `listen`). */
  readonly url?: string | undefined
  /** `check --diff`: preview a reload against the running gateway's admin API. */
  readonly diff?: boolean
  /** `status --json`: the admin API's answer as it came. */
  readonly json?: boolean
  /** `check --verbose`: each sandbox in full, every grant with its source. */
  readonly verbose?: boolean
}

/**
 * A `barbican` command to suggest, with the `--config` the user gave, so that it can be pasted
 * as is and acts on the same configuration.
 */
export function suggestCommand(options: CommandOptions, args: string): string {
  return options.config === undefined
    ? `barbican ${args}`
    : `barbican ${args} --config ${shellWord(options.config)}`
}

/** A word a POSIX shell reads back unchanged. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`
}

/** `unknown command "serv" (did you mean "serve"?)`: names what was typed, and what is close. */
export function unknownWord(what: string, typed: string, known: readonly string[]): string {
  return `unknown ${what} "${typed}"${didYouMean(typed, known)}`
}

/**
 * What the running commands (serve, stdio, check) add to trust: suggestions spelt with the
 * user's --config, `--allow-floating`, and today's version named in a floating refusal.
 */
export function trustOptionsOf(options: CommandOptions): {
  hint: CommandHint
  allowFloating: boolean
  resolveVersion: VersionResolver
} {
  return {
    hint: (args) => suggestCommand(options, args),
    allowFloating: options.allowFloating === true,
    resolveVersion: npmResolver,
  }
}
