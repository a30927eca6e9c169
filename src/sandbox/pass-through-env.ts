/**
 * The few variables of Barbican's own environment that every stdio upstream inherits, because a
 * server cannot work without them on an ordinary machine and they carry no secret of another
 * server: PATH and HOME, how to reach the network (proxies), which certificate authorities to
 * trust (a TLS-inspecting proxy's CA), and locale and timezone. Anything else an upstream needs
 * is declared in its `env` (docs/configuration.md, "Environment of a stdio upstream").
 *
 * One list, read by the process launcher and by whatever confines the process: a sandbox must
 * make the files `passThroughFiles` names readable inside it, or `npx` behind such a proxy fails
 * on its first download.
 */

/** Always inherited (PATH gets a fallback when Barbican has none). */
export const BASE_VARIABLES = ['PATH', 'HOME'] as const

/** How to reach the network: proxies, in both spellings tools read. */
export const PROXY_VARIABLES = [
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'all_proxy',
] as const

/** Which certificate authorities to trust; each names a file or a directory. */
export const CA_VARIABLES = [
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'REQUESTS_CA_BUNDLE',
] as const

/** Locale and timezone: messages, sorting and dates as the operator reads them. */
export const LOCALE_VARIABLES = ['LANG', 'LANGUAGE', 'TZ'] as const
/** Every variable with this prefix is locale (LC_ALL, LC_CTYPE, …). */
export const LOCALE_PREFIX = 'LC_'

/** Every variable passed through by name, in one list (for docs, tests and the sandbox). */
export const PASS_THROUGH_VARIABLES: readonly string[] = [
  ...BASE_VARIABLES,
  ...PROXY_VARIABLES,
  ...CA_VARIABLES,
  ...LOCALE_VARIABLES,
]

const FALLBACK_PATH = '/usr/local/bin:/usr/bin:/bin'

/** True when `name` is inherited from Barbican's environment by default. */
export function isPassedThrough(name: string): boolean {
  return PASS_THROUGH_VARIABLES.includes(name) || name.startsWith(LOCALE_PREFIX)
}

/**
 * A stdio upstream's whole environment: the pass-through variables Barbican has, then what the
 * config declares (which wins, and may set a pass-through variable to '' to blank it).
 */
export function childEnvironment(
  declared: Readonly<Record<string, string>> = {},
  parent: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && isPassedThrough(name)) env[name] = value
  }
  env.PATH ??= FALLBACK_PATH
  return Object.assign(env, declared)
}

/**
 * The files and directories the CA variables of `env` (a child's environment) name: what a
 * sandbox around the child must let it read.
 */
export function passThroughFiles(env: Readonly<Record<string, string>>): string[] {
  const paths: string[] = []
  for (const name of CA_VARIABLES) {
    const value = env[name]
    if (value !== undefined && value !== '' && !paths.includes(value)) paths.push(value)
  }
  return paths
}
