/**
 * What every `barbican` subcommand receives: the shared options and where to write. Kept apart
 * from main.ts so that the commands, which main.ts imports, never import main.ts back.
 */

export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
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
}
