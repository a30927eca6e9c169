/**
 * What every `barbican` subcommand receives: the shared options and where to write. Kept apart
 * from main.ts so that the commands, which main.ts imports, never import main.ts back.
 */

export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  /** All of stdin, at most `maxBytes` (`barbican seal`); absent: the process's stdin. */
  readonly stdin?: (maxBytes: number) => Promise<string>
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
  /** `status --url`: the running gateway's address (default: the config's `listen`). */
  readonly url?: string | undefined
  /** `check --diff`: preview a reload against the running gateway's admin API. */
  readonly diff?: boolean
  /** `status --json`: the admin API's answer as it came. */
  readonly json?: boolean
}
