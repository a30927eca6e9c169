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

/** Codes 2026-07-28 reserves for the spec; legacy peers must never see them. */
export function isModernOnlyCode(code: number): boolean {
  return code >= -32099 && code <= -32020
}

export { INTERNAL_ERROR, INVALID_PARAMS } from './jsonrpc.ts'
