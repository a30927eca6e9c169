/** Matchers for assertions about Barbican's errors. */
import { BarbicanError, type ErrorCode } from '../../src/common/errors.ts'

/** For `assert.rejects`/`assert.throws`: a BarbicanError with `code`. */
export function hasCode(code: ErrorCode): (err: unknown) => boolean {
  return (err: unknown) => err instanceof BarbicanError && err.code === code
}

/** The JSON-RPC `error` member of a response body. */
export function errorOf(body: unknown): { code: number; message: string } {
  return (body as { error: { code: number; message: string } }).error
}
