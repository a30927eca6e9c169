/**
 * What every client request must satisfy before it is routed: a revision Barbican speaks (the
 * one a 2026-07-28 request claims in its own `_meta`, else the session's), a method that exists
 * in that revision, the 2026 envelope when one is claimed, and `Mcp-Param-*` headers that match
 * the arguments of tools declaring them. Pure checks over the request, so the session only
 * decides what to do with a failure.
 */
import { paramHeaderMismatch } from '../bridge/param-headers.ts'
import { BarbicanError } from '../common/errors.ts'
import { HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION } from '../protocol/error-codes.ts'
import { isPlainObject, type JsonRpcId, type JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { existsIn, methodSpec } from '../protocol/methods.ts'
import { type ErrorReply, META, type Request } from '../protocol/model.ts'
import { eraOf, isRevision, MODERN_REVISIONS, type Revision } from '../protocol/revisions.ts'
import type { ReceiveInfo } from '../transports/transport.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'

/**
 * The revision a request claims in its own `_meta` (2026-07-28 requests carry one each);
 * undefined for a legacy request, which speaks the session's negotiated revision.
 */
export function claimedRevision(wire: JsonRpcRequest): unknown {
  return isPlainObject(wire.params?._meta) ? wire.params._meta[META.protocolVersion] : undefined
}

/** Whether a claimed revision is one of the per-request (2026-07-28 era) revisions. */
export function isModernClaim(claimed: unknown): claimed is Revision {
  return isRevision(claimed) && eraOf(claimed) === 'modern'
}

/** The reply to a request claiming a revision Barbican does not speak per request. */
export function unsupportedRevision(id: JsonRpcId, claimed: unknown): ErrorReply {
  return {
    kind: 'error',
    id,
    code: UNSUPPORTED_PROTOCOL_VERSION,
    message: `Unsupported protocol version: ${String(claimed)}`,
    data: { supported: [...MODERN_REVISIONS], requested: claimed },
  }
}

/**
 * Throws the typed error for a request that cannot be served in `revision`: a 2026 request
 * without its envelope, an unknown method, or a method the revision does not have.
 */
export function assertMethodAllowed(request: Request, modern: boolean, revision: Revision): void {
  const { method } = request
  if (modern && !request.envelope) {
    throw new BarbicanError(
      'ERR_INVALID_PARAMS',
      'Missing required _meta fields: io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities',
    )
  }
  if (!methodSpec(method)) {
    throw new BarbicanError('ERR_METHOD_UNKNOWN', `Method not found: ${method}`)
  }
  if (!existsIn(method, revision)) {
    throw new BarbicanError(
      'ERR_METHOD_NOT_IN_REVISION',
      `Method ${method} does not exist in MCP ${revision}`,
    )
  }
}

/**
 * The reply to a 2026-07-28 `tools/call` whose `Mcp-Param-*` headers disagree with its
 * arguments (for a tool that declares them); undefined when they agree.
 */
export async function paramHeaderReply(
  server: VirtualServer,
  request: Request,
  headers: NonNullable<ReceiveInfo['headers']>,
): Promise<ErrorReply | undefined> {
  const name = request.params?.name
  const { catalog } = await server.catalog()
  const tool = catalog.tools.find((t) => t.name === name)
  const mismatch = paramHeaderMismatch(headers, tool?.inputSchema, request.params?.arguments)
  if (mismatch === undefined) return undefined
  return { kind: 'error', id: request.id, code: HEADER_MISMATCH, message: mismatch }
}
