/**
 * Checkpoints published outside the store (ADR 102): each checkpoint the gateway signs is also
 * appended, as one JSON line, to a file the operator names (`audit.checkpoints.publish`), written
 * to the log stream and sent with the OTel log export. Whoever can write the store cannot reach
 * those copies, so `barbican audit verify --checkpoint FILE` can tell a log whose tail was cut
 * together with its checkpoints from one that was never longer (verify.ts).
 */
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  writeSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { checkpointHash } from './audit-key.ts'
import type { Checkpoint } from './audit-store.ts'

/** The file a publish path names: itself, or this file inside it when it is a directory. */
export const PUBLISHED_FILE = 'audit-checkpoints.jsonl'

/** The published form of a checkpoint: flat, with its own hash, for a SIEM and for verify. */
export function publishedFields(c: Checkpoint): Record<string, unknown> {
  return {
    timestamp: c.at,
    source: 'barbican',
    type: 'checkpoint',
    number: c.number,
    seq: c.seq,
    hash: c.hash,
    at: c.at,
    reason: c.reason,
    prev: c.prev,
    checkpointHash: checkpointHash(c),
    keyId: c.keyId,
    signature: c.signature,
  }
}

/** The file behind a configured publish path (a directory holds PUBLISHED_FILE). */
export function publishedFileOf(path: string): string {
  return existsSync(path) && statSync(path).isDirectory() ? join(path, PUBLISHED_FILE) : path
}

/**
 * A sink that appends each checkpoint to the file at `path` (mode 0600, one `write(2)` a line,
 * so several processes appending to one file never interleave within a line). The file is
 * opened per checkpoint: checkpoints are rare, and an operator who rotates it loses nothing.
 */
export function publishToFile(path: string): (checkpoint: Checkpoint) => void {
  return (checkpoint) => {
    const file = publishedFileOf(path)
    mkdirSync(dirname(file), { recursive: true })
    const fd = openSync(file, 'a', 0o600)
    try {
      writeSync(fd, `${JSON.stringify(publishedFields(checkpoint))}\n`)
    } finally {
      closeSync(fd)
    }
  }
}

/** What a file of published checkpoints holds. */
export interface PublishedCheckpoints {
  readonly file: string
  readonly checkpoints: readonly Checkpoint[]
  /** Lines that are neither a published checkpoint nor a log line carrying one. */
  readonly ignored: number
}

/**
 * The checkpoints in a published file: its own lines, or log lines (JSON) that carry one under
 * `checkpoint` (the log stream's copy), so either copy can be given to verify. Throws when the
 * file cannot be read.
 */
export function readPublished(path: string): PublishedCheckpoints {
  const file = publishedFileOf(path)
  const checkpoints: Checkpoint[] = []
  let ignored = 0
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') continue
    const c = checkpointOfLine(line)
    if (c) checkpoints.push(c)
    else ignored++
  }
  return { file, checkpoints, ignored }
}

function checkpointOfLine(line: string): Checkpoint | undefined {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const v = value as Record<string, unknown>
  const f = (
    typeof v.checkpoint === 'object' && v.checkpoint !== null ? v.checkpoint : v
  ) as Record<string, unknown>
  if (f.type !== 'checkpoint') return undefined
  const text = (k: string) => (typeof f[k] === 'string' ? (f[k] as string) : undefined)
  const count = (k: string) => (Number.isSafeInteger(f[k]) ? (f[k] as number) : undefined)
  const [seq, number, hash, at, reason, prev, keyId, signature] = [
    count('seq'),
    count('number'),
    text('hash'),
    text('at'),
    text('reason'),
    text('prev'),
    text('keyId'),
    text('signature'),
  ]
  if (
    seq === undefined ||
    number === undefined ||
    hash === undefined ||
    at === undefined ||
    prev === undefined ||
    keyId === undefined ||
    signature === undefined ||
    (reason !== 'periodic' && reason !== 'shutdown' && reason !== 'prune')
  ) {
    return undefined
  }
  return { seq, number, hash, at, reason, prev, keyId, signature }
}
