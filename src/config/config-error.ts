/**
 * The one error every configuration fault becomes. It carries every problem found, each with the
 * exact key path in the operator's own file (and its line where known), so one run of
 * `barbican check` shows everything to fix.
 */
import { BarbicanError } from '../common/errors.ts'

/** A key path: object keys and array indexes, outermost first. */
export type KeyPath = readonly (string | number)[]

/** One problem at one place in the file. */
export interface ConfigIssue {
  readonly path: KeyPath
  /** What was expected, worded for a person; never includes secret values. */
  readonly message: string
  /** 1-based position of the offending value, where the file text is known. */
  readonly line?: number
  readonly column?: number
}

/** `ERR_CONFIG_INVALID` with the full list of issues in `issues` (also in `data.issues`). */
export class ConfigError extends BarbicanError {
  readonly issues: readonly ConfigIssue[]
  readonly file: string | undefined

  constructor(issues: readonly ConfigIssue[], options: { file?: string | undefined } = {}) {
    super('ERR_CONFIG_INVALID', formatConfigIssues(issues, options.file), {
      data: { file: options.file, issues },
    })
    this.issues = issues
    this.file = options.file
  }
}

/**
 * Renders `['upstreams', 'files', 'args', 1]` as `upstreams.files.args[1]`; keys that are not
 * plain identifiers are quoted (`env["MY.VAR"]`) so the path stays unambiguous.
 */
export function formatKeyPath(path: KeyPath): string {
  let out = ''
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`
    else if (/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(part)) out += out === '' ? part : `.${part}`
    else out += `[${JSON.stringify(part)}]`
  }
  return out === '' ? '(top level)' : out
}

/** The human-readable message of a ConfigError: a headline, then one line per issue. */
export function formatConfigIssues(issues: readonly ConfigIssue[], file?: string): string {
  const where = file === undefined ? 'Invalid configuration' : `Invalid configuration in ${file}`
  const count = issues.length === 1 ? '1 problem' : `${issues.length} problems`
  const lines = issues.map((issue) => {
    const at =
      issue.line === undefined
        ? ''
        : ` (line ${issue.line}${issue.column === undefined ? '' : `, column ${issue.column}`})`
    return `  - ${formatKeyPath(issue.path)}${at}: ${issue.message}`
  })
  return [`${where}: ${count}`, ...lines].join('\n')
}
