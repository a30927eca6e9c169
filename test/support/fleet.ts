/**
 * `barbican serve` replicas as child processes, for the fleet tests that put several of them on
 * one PostgreSQL and one Redis (docs/decisions/058).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

const bin = join(import.meta.dirname, '../../bin/barbican.js')

/** A TCP port free on 127.0.0.1 at the time of asking. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Whether the gateway at `url` answers its health check; false while it cannot be reached. */
export async function healthy(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/healthz`)).ok
  } catch {
    return false
  }
}

export interface ServeReplica {
  readonly url: string
  /** The replica's barbican.yaml, for CLI commands run against the same backends. */
  readonly config: string
  readonly child: ChildProcess
}

/**
 * Writes `yaml` to `home/barbican.yaml` (creating `home` unless a restart reuses it), starts
 * `barbican serve` on 127.0.0.1:`port` with `env` over this process's environment, and resolves
 * once it is healthy.
 * The caller starts replicas one at a time where the first must pin the upstream's tools.
 */
export async function startServeReplica(options: {
  readonly home: string
  readonly yaml: readonly string[]
  readonly port: number
  readonly env: NodeJS.ProcessEnv
  readonly startMs: number
}): Promise<ServeReplica> {
  mkdirSync(options.home, { recursive: true })
  const config = join(options.home, 'barbican.yaml')
  writeFileSync(config, options.yaml.join('\n'))
  const url = `http://127.0.0.1:${options.port}`
  const child = spawn(
    process.execPath,
    [bin, 'serve', '--config', config, '--listen', `127.0.0.1:${options.port}`],
    { stdio: 'ignore', env: { ...process.env, ...options.env } },
  )
  const deadline = Date.now() + options.startMs
  while (!(await healthy(url))) {
    if (Date.now() > deadline) {
      // The caller never learns of this child: end it here rather than leave it running.
      child.kill('SIGKILL')
      throw new Error(`replica at ${url} did not start within ${options.startMs} ms`)
    }
    await sleep(50)
  }
  return { url, config, child }
}
