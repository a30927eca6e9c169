/**
 * The trust keys of the native format: each upstream's `trust` (pinning, scan and launch
 * policy) and the top-level `store` where pins live. Kept apart from the upstream and root
 * schemas so that those stay about connecting and limits.
 */
import { z } from 'zod'
import { postgresStoreSchema } from './backends.ts'
import { DEFAULT_STORE_PATH } from './defaults.ts'

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

export { DEFAULT_STORE_PATH }

const TRUST_DEFAULTS = {
  firstSight: 'trust',
  onChange: 'quarantine',
  scan: 'warn',
  allowFloating: false,
  allowInlineCode: false,
} as const

/** `trust:` of one upstream; every key has a default. */
export const trustSchema = doc(
  z
    .strictObject({
      firstSight: doc(
        z.enum(['trust', 'approve']).default(TRUST_DEFAULTS.firstSight),
        'First sight',
        'What Barbican does with a tool, prompt, resource template, instructions or identity it ' +
          'has never seen: trust pins it at once (trust on first use); approve hides it until an ' +
          'operator runs `barbican pins approve`. Default: trust.',
      ),
      onChange: doc(
        z.enum(['quarantine', 'warn']).default(TRUST_DEFAULTS.onChange),
        'On change',
        'What a definition that differs from its pin does: quarantine hides exactly that item ' +
          '(calls are refused with the change named) until approved; warn only logs it. ' +
          'Default: quarantine.',
      ),
      scan: doc(
        z.enum(['warn', 'quarantine']).default(TRUST_DEFAULTS.scan),
        'Scan policy',
        'What high and critical scan findings (hidden Unicode, instructions to the model, ' +
          'shadowing, imitated names) do: warn logs them; quarantine hides the item until an ' +
          'operator approves it. Default: warn.',
      ),
      allowFloating: doc(
        z.boolean().default(TRUST_DEFAULTS.allowFloating),
        'Allow floating versions',
        'Launch a package given without an exact version (npx pkg, pkg@latest, uvx pkg). ' +
          'Default: false: such an upstream is refused before launch.',
      ),
      allowInlineCode: doc(
        z.boolean().default(TRUST_DEFAULTS.allowInlineCode),
        'Allow inline code',
        'Launch code that no file holds, which barbican.lock cannot pin: node -e/-p/--eval/' +
          '--print, a data: URL given to --import/--require/--loader (also in NODE_OPTIONS), ' +
          'python -c, deno eval, bun -e, a program read from stdin. Default: false: such an ' +
          'upstream is refused before launch.',
      ),
      allowScripts: doc(
        z.array(z.string().min(1)).optional(),
        'Allow install scripts',
        'npm packages (by name) whose install scripts (preinstall, install, postinstall, a ' +
          "native module build) may run when Barbican installs this upstream's npx package. " +
          "They run outside the sandbox, with Barbican's rights. Barbican names the packages " +
          'whose scripts it skipped, in the log and `barbican check`. Default: none run ' +
          '(docs/sandbox.md, ADR 107).',
      ),
    })
    .optional(),
  'Trust',
  'Pinning, scanning and launch policy of this upstream (docs/trust.md). Default: ' +
    '{ firstSight: trust, onChange: quarantine, scan: warn, allowFloating: false, ' +
    'allowInlineCode: false }.',
)

/** Top-level `store:`; absent means the SQLite file beside the config. */
export const storeSchema = doc(
  z.union([
    z.strictObject({
      sqlite: doc(
        z.strictObject({
          path: doc(
            z.string().min(1).default(DEFAULT_STORE_PATH),
            'Path',
            'SQLite file; a relative path resolves against the config file directory. ' +
              `Default: ${DEFAULT_STORE_PATH}.`,
          ),
        }),
        'SQLite',
        'The embedded store (a single file).',
      ),
    }),
    z.strictObject({
      memory: doc(
        z.strictObject({}),
        'Memory',
        'Keep pins in memory only: every start is a first sight.',
      ),
    }),
    z.strictObject({ postgres: postgresStoreSchema }),
  ]),
  'Store',
  `Where pins, their history and baselines live. Default: { sqlite: { path: ${DEFAULT_STORE_PATH} } }, or PostgreSQL when BARBICAN_POSTGRES_URL is set.`,
)
