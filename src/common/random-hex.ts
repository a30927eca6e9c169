/**
 * Random ids for the hot path: hex of CSPRNG bytes drawn from a pool filled 4 KiB at a time.
 * Each draw from OpenSSL costs a syscall (its DRBG checks the process id for a fork, `getpid`),
 * so one `randomFillSync` serves hundreds of ids instead of one syscall per id. Each byte is
 * handed out once, so the ids are as unpredictable as separate draws.
 */
import { randomFillSync } from 'node:crypto'

const POOL = Buffer.alloc(4096)
let poolOffset = POOL.length

/** `bytes` (at most 4096) random bytes, as lowercase hex. */
export function randomHex(bytes: number): string {
  if (poolOffset + bytes > POOL.length) {
    randomFillSync(POOL)
    poolOffset = 0
  }
  const hex = POOL.toString('hex', poolOffset, poolOffset + bytes)
  poolOffset += bytes
  return hex
}
