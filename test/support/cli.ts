/** Runs the `barbican` command in-process and collects what it wrote. */
import { main } from '../../src/cli/main.ts'

export interface CliRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export async function runCli(args: readonly string[]): Promise<CliRun> {
  let stdout = ''
  let stderr = ''
  const code = await main(args, {
    stdout: (text) => {
      stdout += text
    },
    stderr: (text) => {
      stderr += text
    },
  })
  return { code, stdout, stderr }
}
