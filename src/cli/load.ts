/** Loading the configuration for a command: the named file, the default file, or the demo. */

import { Worker } from 'node:worker_threads'
import type { LoadedConfig } from '../config/config.ts'
import type { LoadReply, LoadRequest } from '../config/load-worker.ts'
import type { CliIo, CommandOptions } from './command.ts'

/**
 * The worker's script: beside the sources, or `config-worker.js` beside the build's own files
 * (scripts/build.js bundles it on its own, with yaml and zod, which the command does not load).
 */
const WORKER = import.meta.url.endsWith('.ts')
  ? new URL('../config/load-worker.ts', import.meta.url)
  : new URL('./config-worker.js', import.meta.url)

/** Runs the load in a worker thread (src/config/load-worker.ts says why). */
function loadInWorker(request: LoadRequest): Promise<LoadReply> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { workerData: request })
    worker.once('message', resolve)
    worker.once('error', reject)
    worker.once('exit', (code) =>
      reject(new Error(`the config loader stopped (exit code ${code})`)),
    )
  })
}

/**
 * Returns the loaded configuration, or `undefined` after printing why it cannot be loaded.
 * With `demo`, a missing default file yields the embedded demo configuration.
 */
export async function loadForCommand(
  options: CommandOptions,
  io: CliIo,
  demo: boolean,
): Promise<LoadedConfig | undefined> {
  let reply: LoadReply
  try {
    reply = await loadInWorker({
      path: options.config,
      cwd: process.cwd(),
      env: { ...process.env },
      listen: options.listen,
      strict: options.strict === true,
      demo,
    })
  } catch (err) {
    reply = { error: (err as Error).message }
  }
  if ('error' in reply) {
    io.stderr(`barbican: ${reply.error}\n`)
    return undefined
  }
  if ('missing' in reply) {
    io.stderr('barbican: no configuration: pass --config FILE or create barbican.yaml here\n')
    return undefined
  }
  for (const warning of reply.loaded.warnings) io.stderr(`barbican: warning: ${warning}\n`)
  return reply.loaded
}
