/** MCP error codes beyond the JSON-RPC standard ones, and how they differ by revision. */

/** Resource not found in 2024-11-05 … 2025-11-25; 2026-07-28 uses -32602 and forbids -32002. */
export const LEGACY_RESOURCE_NOT_FOUND = -32002
/** URL elicitation required, 2025-11-25 only. */
export const URL_ELICITATION_REQUIRED = -32042
/** 2026-07-28: an HTTP header is missing, malformed or disagrees with the body. */
export const HEADER_MISMATCH = -32020
/** 2026-07-28: the request needs a client capability the client did not declare. */
export const MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
/** 2026-07-28: the requested protocol version is not supported. */
export const UNSUPPORTED_PROTOCOL_VERSION = -32022

/**
 * The codes 2026-07-28 defines for its stateless HTTP hop (-32020 … -32022); legacy peers must
 * never see them. The rest of -32023 … -32099 is only reserved by 2026, and legacy revisions
 * leave the whole -32000 … -32099 range to implementations, so those codes pass unchanged.
 */
export function isModernOnlyCode(code: number): boolean {
  return code >= UNSUPPORTED_PROTOCOL_VERSION && code <= HEADER_MISMATCH
}

export { INTERNAL_ERROR, INVALID_PARAMS } from './jsonrpc.ts'
