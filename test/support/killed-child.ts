/**
 * A Node process killed with SIGKILL at a chosen moment: the crash tests' way of proving that
 * what a process acknowledged before it died survives it (audit journals, ADR 048/090).
 */
import { spawn } from 'node:child_process'

/**
 * Runs the ES module `script` in a new Node process, waits until it writes `marker` to stdout
 * (the point after which nothing it acknowledged may be lost), then kills it with SIGKILL and
 * waits for it to exit. Rejects if the process exits before writing the marker.
 */
export async function killWhenWritten(script: string, marker = 'settled'): Promise<void> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes(marker)) resolve()
    })
    child.once('exit', (code) => reject(new Error(`child exited ${code} before settling`)))
  })
  child.kill('SIGKILL')
  await new Promise((resolve) => child.once('exit', resolve))
}
