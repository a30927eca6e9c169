/**
 * `barbican seal --upstream NAME (--header NAME | --env NAME)`: encrypts a secret for one slot of
 * an upstream's static credentials and prints the `enc:v1:…` value to paste into the config.
 * The secret is read from stdin, never from the command line, where it would be visible to every
 * user of the machine (`ps`, /proc) and kept in shell history.
 */
import { keyProviderFromEnv, secretSlot } from '../credentials/secret-box.ts'
import type { CliIo, CommandOptions } from './command.ts'

/** The longest secret read from stdin (a header value or an environment variable). */
export const MAX_SECRET_BYTES = 64 * 1024

export async function runSeal(
  options: CommandOptions,
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { upstream, header, env: variable } = options
  if (upstream === undefined || (header === undefined) === (variable === undefined)) {
    io.stderr(
      'barbican: seal needs --upstream NAME and one of --header NAME or --env NAME; the secret comes on stdin\n',
    )
    return 2
  }
  const { provider, ephemeral } = keyProviderFromEnv(env)
  if (ephemeral) {
    io.stderr(
      'barbican: BARBICAN_SECRET_KEY is not set: a value sealed now could never be opened. Set it to\n' +
        '32 random bytes, base64 or hex, the same for seal and serve.\n',
    )
    return 1
  }
  const read = io.stdin ?? readStdin
  let secret: string
  try {
    secret = await read(MAX_SECRET_BYTES)
  } catch (err) {
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 1
  }
  // `echo secret | barbican seal` and a typed line end in a newline that is not part of it.
  secret = secret.replace(/\r?\n$/, '')
  if (secret === '') {
    io.stderr('barbican: no secret on stdin (e.g. printf %s "$TOKEN" | barbican seal …)\n')
    return 1
  }
  const slot =
    header !== undefined
      ? secretSlot(upstream, 'header', header)
      : secretSlot(upstream, 'env', variable as string)
  io.stdout(`${await provider.seal(secret, slot)}\n`)
  return 0
}

/** All of stdin as UTF-8, refusing more than `maxBytes`. */
function readStdin(maxBytes: number): Promise<string> {
  const input = process.stdin
  if (input.isTTY) process.stderr.write('Type the secret, then press Enter and Ctrl-D:\n')
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    input.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > maxBytes) {
        input.destroy()
        reject(new Error(`the secret on stdin is longer than ${maxBytes} bytes`))
        return
      }
      chunks.push(chunk)
    })
    input.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    input.once('error', reject)
  })
}
