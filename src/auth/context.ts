/**
 * The tool-call context: every upstream request made for a client's call says who it is for.
 * Barbican adds `_meta["dev.barbican/context"]` ({ user, tenant, client, assertion, traceparent })
 * and, on HTTP upstreams, the same assertion and trace context as headers. The prefix is
 * Barbican's own reverse-DNS `_meta` namespace (the MCP `_meta` naming rule reserves only the
 * modelcontextprotocol/mcp labels); a client cannot forge it, because any `dev.barbican/` key a
 * client sends is removed as the message enters (client-meta.ts), and again here. The client's own token never appears: nothing here reads the
 * inbound `Authorization` header, and upstream credentials come from Barbican's own store.
 */
import { randomBytes } from 'node:crypto'
import { randomHex } from '../common/random-hex.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply } from '../protocol/model.ts'
import type { AssertionSigner } from './assertion.ts'
import { ANONYMOUS, type Identity } from './identity.ts'

/** Barbican's `_meta` prefix and the context key under it. */
export const META_PREFIX = 'dev.barbican/'
export const CONTEXT_META_KEY = `${META_PREFIX}context`
/** HTTP header carrying the assertion to HTTP upstreams. */
export const ASSERTION_HEADER = 'barbican-assertion'

/**
 * Who an upstream request is for. Forwarding records it on every request it sends (the owner's
 * `caller`), for a session's own calls and for a 2026-07-28 call held across rounds alike, so the
 * stamp never has to know which of the two stands behind the request.
 */
export interface Caller {
  readonly identity: Identity
  /** Lower-cased headers of the client's HTTP request (trace context); absent on stdio. */
  readonly headers?: Readonly<Record<string, string | string[] | undefined>> | undefined
  /** What the client declared: URL-mode elicitation decides how an account link is asked for. */
  readonly clientCapabilities: JsonObject
}

/** The owner forwarding records on upstream requests: only what the stamp reads. */
interface OwnerShape {
  readonly caller: Caller
  /** The trace context of the upstream request's own span (tracing on): passed on as is. */
  readonly traceparent?: string | undefined
}

/** What Barbican presents to an upstream on a user's behalf, or why it cannot yet. */
export type CredentialOutcome =
  | { readonly headers: Readonly<Record<string, string>> }
  | { readonly linkRequired: { readonly url: string; readonly message: string } }

/** Per-upstream outbound credentials (see src/credentials/). */
export interface CredentialSource {
  forUser(identity: Identity): Promise<CredentialOutcome>
  /** The upstream refused what `forUser` gave (HTTP 401): forget it. */
  rejected?(identity: Identity): Promise<void>
}

export type StampOutcome =
  | {
      readonly params: JsonObject | undefined
      readonly headers: Record<string, string>
      /**
       * When the upstream answers 401: forgets the refused credentials and returns the reply to
       * give instead (the link to follow again), or undefined to pass the refusal on.
       */
      readonly onRejected?: (() => Promise<ErrorReply | undefined>) | undefined
    }
  | { readonly reply: ErrorReply }

/** Adds the context to one upstream request; `owner` is what the session recorded. */
export type Stamp = (
  method: string,
  params: JsonObject | undefined,
  owner: unknown,
) => Promise<StampOutcome>

export interface StampOptions {
  readonly signer: AssertionSigner
  /** The `aud` of assertions for this upstream. */
  readonly audience: string
  readonly credentials?: CredentialSource | undefined
}

/** Builds the stamp of one upstream. */
export function createStamp(options: StampOptions): Stamp {
  return async (_method, params, owner) => {
    const known = isOwner(owner) ? owner : undefined
    const caller = known?.caller
    const identity = caller?.identity ?? ANONYMOUS
    const headers: Record<string, string> = {}
    const source = options.credentials
    let onRejected: (() => Promise<ErrorReply | undefined>) | undefined
    if (source) {
      const outcome = await source.forUser(identity)
      if ('linkRequired' in outcome) {
        return { reply: linkRequiredReply(outcome.linkRequired, supportsUrlMode(caller)) }
      }
      Object.assign(headers, outcome.headers)
      if (source.rejected) {
        const forget = source.rejected.bind(source)
        onRejected = async () => {
          await forget(identity)
          const next = await source.forUser(identity)
          return 'linkRequired' in next
            ? linkRequiredReply(next.linkRequired, supportsUrlMode(caller))
            : undefined
        }
      }
    }
    const meta = isPlainObject(params?._meta) ? params._meta : undefined
    const incoming = meta?.traceparent
    const traceparent =
      known?.traceparent ??
      childTraceparent(typeof incoming === 'string' ? incoming : header(caller, 'traceparent'))
    const assertion = await options.signer.assertion({ identity, audience: options.audience })
    const context: JsonObject = { user: identity.subject }
    if (identity.tenant !== undefined) context.tenant = identity.tenant
    if (identity.client !== undefined) context.client = identity.client
    context.assertion = assertion
    context.traceparent = traceparent
    const cleanMeta: JsonObject = {}
    if (meta !== undefined) {
      for (const key in meta) {
        if (Object.hasOwn(meta, key) && !key.startsWith(META_PREFIX)) cleanMeta[key] = meta[key]
      }
    }
    cleanMeta[CONTEXT_META_KEY] = context
    // Also where MCP tracing conventions look for it, so instrumented servers join the trace.
    cleanMeta.traceparent = traceparent
    headers[ASSERTION_HEADER] = assertion
    headers.traceparent = traceparent
    const tracestate = header(caller, 'tracestate')
    if (tracestate !== undefined) headers.tracestate = tracestate
    return { params: { ...params, _meta: cleanMeta }, headers, onRejected }
  }
}

/**
 * URL-mode elicitation (-32042) for clients that declared `elicitation.url`; otherwise a precise
 * -32602 whose message and data carry the URL. (The codecs also turn -32042 into -32602 for
 * revisions without URL mode.)
 */
function linkRequiredReply(link: { url: string; message: string }, urlMode: boolean): ErrorReply {
  const message = `${link.message} Open ${link.url} to link your account, then retry.`
  if (!urlMode) {
    return {
      kind: 'error',
      id: null,
      code: -32602,
      message,
      data: { barbicanCode: 'ERR_LINK_REQUIRED', url: link.url },
    }
  }
  return {
    kind: 'error',
    id: null,
    code: -32042,
    message,
    data: {
      elicitations: [
        {
          mode: 'url',
          elicitationId: randomBytes(12).toString('base64url'),
          url: link.url,
          message: link.message,
        },
      ],
    },
  }
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * W3C trace context for the upstream hop: the caller's trace id with a new parent span, or a new
 * trace when the caller sent none (or an invalid one).
 */
export function childTraceparent(incoming: string | undefined): string {
  const span = randomHex(8)
  const match = incoming === undefined ? null : TRACEPARENT.exec(incoming.trim())
  if (match && !ALL_ZERO.test(match[1]!)) return `00-${match[1]}-${span}-${match[3]}`
  return `00-${randomHex(16)}-${span}-01`
}

const ALL_ZERO = /^0+$/

/** Whether the caller's client declared URL-mode elicitation (unknown owners are assumed not). */
function supportsUrlMode(caller: Caller | undefined): boolean {
  const elicitation = caller?.clientCapabilities.elicitation
  return isPlainObject(elicitation) && isPlainObject(elicitation.url)
}

function header(caller: Caller | undefined, name: string): string | undefined {
  const value = caller?.headers?.[name]
  return typeof value === 'string' ? value : undefined
}

function isOwner(owner: unknown): owner is OwnerShape {
  return (
    typeof owner === 'object' &&
    owner !== null &&
    'caller' in owner &&
    typeof (owner as { caller: unknown }).caller === 'object' &&
    (owner as { caller: unknown }).caller !== null
  )
}
