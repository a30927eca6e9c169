/**
 * What `barbican check` says about the `auth:` section beyond its schema: the files it names
 * exist and hold what they must, and the keys it carries can be used. The gateway tolerates a
 * missing or broken keys file at run time (it grants nothing, fail closed); `check` is where an
 * operator learns about it before the key holders do.
 */
import { createPrivateKey } from 'node:crypto'
import type { AuthConfig } from '../config/auth-schema.ts'
import { readKeysFile } from './api-keys-file.ts'

export interface AuthProblem {
  /** `fail` makes `check` exit non-zero; `warn` is printed only. */
  readonly level: 'fail' | 'warn'
  /** The config key, e.g. `auth.apiKeys.file`. */
  readonly key: string
  readonly message: string
}

export function checkAuth(auth: AuthConfig, env: NodeJS.ProcessEnv = process.env): AuthProblem[] {
  const problems: AuthProblem[] = []
  const file = auth.apiKeys?.file
  if (file !== undefined) {
    try {
      readKeysFile(file)
    } catch (err) {
      problems.push({ level: 'fail', key: 'auth.apiKeys.file', message: (err as Error).message })
    }
  }
  const pem = auth.assertion.privateKeyPem
  if (pem !== undefined) {
    let fault: string | undefined
    try {
      const key = createPrivateKey(pem)
      const curve = key.asymmetricKeyDetails?.namedCurve
      if (key.asymmetricKeyType !== 'ec' || curve !== 'prime256v1')
        fault = `is a ${key.asymmetricKeyType ?? 'non-asymmetric'} key${curve ? ` on ${curve}` : ''}; an EC P-256 key is needed (ES256)`
    } catch (err) {
      fault = `is not a PEM private key (${(err as Error).message})`
    }
    if (fault !== undefined)
      problems.push({ level: 'fail', key: 'auth.assertion.privateKeyPem', message: fault })
  }
  if (auth.tokens !== undefined && !env.BARBICAN_SECRET_KEY?.trim()) {
    // In PostgreSQL the tokens are the fleet's: `serve` refuses to start (upstream-setup.ts).
    problems.push({
      level: 'sqlite' in auth.tokens ? 'warn' : 'fail',
      key: 'sqlite' in auth.tokens ? 'auth.tokens.sqlite' : 'auth.tokens.postgres',
      message:
        'BARBICAN_SECRET_KEY is not set: linked tokens are sealed with a key of this process only and read as unlinked after a restart',
    })
  }
  return problems
}
