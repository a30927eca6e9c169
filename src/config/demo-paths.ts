/**
 * Where the embedded demo writes, apart from demo.ts so that `barbican audit` can find the demo's
 * log without loading the config machinery.
 */
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * Where the demo keeps everything it writes (its memory graph, its files, its pin store and
 * audit log): a per-user folder in the temp directory, never the working directory, so that
 * `npm start` in a checkout leaves the checkout as it was.
 */
export function demoDataDir(): string {
  return join(tmpdir(), `barbican-demo-${process.getuid?.() ?? 'user'}`)
}

/** The demo's pin store; its audit log is `audit.db` beside it, as for any SQLite store. */
export function demoStorePath(dataDir = demoDataDir()): string {
  return join(dataDir, 'barbican.db')
}
