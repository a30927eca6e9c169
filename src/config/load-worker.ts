/**
 * The worker thread that loads the configuration for a command (src/cli/load.ts). Parsing and
 * validating a config needs yaml, zod and the config schema, about 10 MB of memory that a
 * running gateway never uses again; in a worker, all of it goes when the worker ends, and only
 * the validated Config (plain data) comes back. Runs `loadConfig`, and the embedded demo when
 * allowed and no file was found.
 */
import { parentPort, workerData } from 'node:worker_threads'
import type { LoadedConfig } from './config.ts'
import { demoConfig } from './demo.ts'
import { loadConfig } from './load.ts'

/** What the command asks for. */
export interface LoadRequest {
  readonly path: string | undefined
  readonly cwd: string
  readonly env: Readonly<Record<string, string | undefined>>
  readonly listen: string | undefined
  /** `--strict`: a variable that is not set is an error even inside an upstream entry. */
  readonly strict: boolean
  /** Fall back to the embedded demo when no path was given and no default file exists. */
  readonly demo: boolean
}

/** What the worker answers: the config, none found, or why it cannot be loaded. */
export type LoadReply =
  | { readonly loaded: LoadedConfig }
  | { readonly missing: true }
  | { readonly error: string }

async function answer(request: LoadRequest): Promise<LoadReply> {
  try {
    const loaded = await loadConfig(request)
    if (loaded) return { loaded }
    if (!request.demo) return { missing: true }
    return { loaded: demoConfig({ listen: request.listen }) }
  } catch (err) {
    return { error: (err as Error).message }
  }
}

parentPort?.postMessage(await answer(workerData as LoadRequest))
