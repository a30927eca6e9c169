/**
 * How a message spells the `barbican` command it suggests. The CLI passes one that repeats the
 * `--config` the operator gave, so a suggestion can be pasted and acts on the same files.
 */
export type CommandHint = (args: string) => string

/** The suggestion without options: right when the config is the default file. */
export const plainHint: CommandHint = (args) => `barbican ${args}`
