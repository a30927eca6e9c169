/**
 * The one form of a resource URI that filters, permissions and upstreams all see. A glob such
 * as `file://R/public/**` judges text; an upstream serves what that text decodes to. Unless the
 * two agree, `file://R/public/%2e%2e/private/x` passes the glob and the upstream serves the
 * private file. So Barbican normalises every URI before judging it and forwards that form.
 *
 * Normalisation (RFC 3986 section 6.2.2, WHATWG URL parsing):
 * - percent-encoded unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded, other escapes
 *   get upper-case hex;
 * - runs of `/` in the path collapse to one, *before* dot segments are resolved (an upstream
 *   that joins paths would otherwise resolve `/public//../x` differently from the URL parser);
 * - dot segments are resolved (`.`, `..` and their encoded spellings);
 * - the scheme is lower-cased, and the host of the special schemes (`file`, `http`, …); other
 *   hosts and every path keep their case (the scheme decides, and Barbican cannot know it).
 *   A namespace prefix (`files+`) is kept as written and the URI after it judged by its own
 *   scheme. Case changes cannot slip past a filter because excludes match case-insensitively
 *   (compileUriFilter below), while includes and permission grants stay case-sensitive: a changed
 *   case is either refused or not granted (ADR 020).
 *
 * Refused, because no single reading exists: encoded slashes and backslashes (`%2F`, `%5C`),
 * backslashes, NUL and other control characters, double encoding (`%25` followed by two hex
 * digits, which an upstream that decodes twice would turn into a traversal), malformed
 * escapes, dot segments in an opaque path (`mem:a/../b`, which the URL parser leaves alone)
 * and anything that is not an absolute URI.
 */
import picomatch from 'picomatch'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject } from '../protocol/jsonrpc.ts'
import type { Request } from '../protocol/model.ts'

/** Why a URI was refused, in `data.details.reason` of the error. */
export type UriRefusal =
  | 'control-character'
  | 'backslash'
  | 'encoded-separator'
  | 'encoded-nul'
  | 'double-encoding'
  | 'malformed-escape'
  | 'not-absolute'
  | 'opaque-dot-segment'
  | 'unstable'

const MESSAGES: Readonly<Record<UriRefusal, string>> = {
  'control-character': 'contains a control character or surrounding whitespace',
  backslash: 'contains a backslash',
  'encoded-separator': 'contains an encoded slash or backslash (%2F, %5C)',
  'encoded-nul': 'contains an encoded NUL byte (%00)',
  'double-encoding': 'contains a double percent-encoding (%25XX)',
  'malformed-escape': 'contains a "%" not followed by two hex digits',
  'not-absolute': 'is not an absolute URI',
  'opaque-dot-segment': 'has dot segments in a path without an authority',
  unstable: 'does not normalise to a stable form',
}

function refuse(uri: string, reason: UriRefusal): BarbicanError {
  return new BarbicanError(
    'ERR_INVALID_PARAMS',
    `Resource URI refused: it ${MESSAGES[reason]}: ${JSON.stringify(uri)}`,
    { data: { uri, reason } },
  )
}

const UNRESERVED = /[A-Za-z0-9\-._~]/
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f]/
/** RFC 3986 appendix B, with the scheme required. */
const PARTS = /^([A-Za-z][A-Za-z0-9+.-]*):(\/\/[^/?#]*)?([^?#]*)(\?[^#]*)?(#.*)?$/

/**
 * The normalised form of `uri`, or a BarbicanError (ERR_INVALID_PARAMS, `data.reason`) when it
 * has none. Idempotent: a normalised URI normalises to itself.
 *
 * @example
 * normaliseResourceUri('file://R/public/%2e%2e/%70rivate/x') // 'file://r/private/x'
 */
export function normaliseResourceUri(uri: string): string {
  let current = uri
  // One pass is enough for every URI seen so far; the second proves it (fail closed if not).
  for (let pass = 0; pass < 3; pass++) {
    const next = normaliseOnce(current, uri)
    if (next === current) return next
    current = next
  }
  throw refuse(uri, 'unstable')
}

function normaliseOnce(text: string, original: string): string {
  if (CONTROL.test(text) || text.trim() !== text) throw refuse(original, 'control-character')
  if (text.includes('\\')) throw refuse(original, 'backslash')
  const split = splitScheme(text)
  if (split) return `${split.prefix}+${normaliseOnce(split.inner, original)}`
  const decoded = decodeUnreserved(text, original)
  const parts = PARTS.exec(decoded)
  if (!parts) throw refuse(original, 'not-absolute')
  const [, scheme, authority = '', path = '', query = '', fragment = ''] = parts
  // An authority-less path starting with `//` would read as an authority once collapsed.
  const collapsed = path.replace(/\/{2,}/g, '/')
  if (authority === '' && !collapsed.startsWith('/') && /(^|\/)\.{1,2}(\/|$)/.test(collapsed)) {
    throw refuse(original, 'opaque-dot-segment')
  }
  let url: URL
  try {
    url = new URL(`${scheme}:${authority}${collapsed}${query}${fragment}`)
  } catch {
    throw refuse(original, 'not-absolute')
  }
  return upperCaseEscapes(url.href)
}

/**
 * A scheme with `+` splits at its last `+`: what precedes is a namespace prefix
 * (`files+file://…`, an upstream's name, case-sensitive, kept as written) or the first labels
 * of a compound scheme (`svn+ssh:`); what follows is judged as a URI of its own scheme, so a
 * prefixed `file:` URI is normalised exactly like the URI the upstream receives.
 */
function splitScheme(text: string): { prefix: string; inner: string } | undefined {
  const colon = text.indexOf(':')
  const plus = colon < 0 ? -1 : text.lastIndexOf('+', colon)
  if (plus <= 0) return undefined
  const prefix = text.slice(0, plus)
  if (!/^[A-Za-z0-9_.+-]+$/.test(prefix)) return undefined
  return { prefix, inner: text.slice(plus + 1) }
}

/** Decodes `%XX` of unreserved characters; refuses the escapes no reading agrees on. */
function decodeUnreserved(text: string, original: string): string {
  return text.replace(/%(.{0,2})/gs, (_match, hex: string) => {
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw refuse(original, 'malformed-escape')
    const code = Number.parseInt(hex, 16)
    if (code === 0x2f || code === 0x5c) throw refuse(original, 'encoded-separator')
    if (code === 0) throw refuse(original, 'encoded-nul')
    const char = String.fromCharCode(code)
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`
  })
}

function upperCaseEscapes(text: string): string {
  return text.replace(/%[0-9a-f]{2}/gi, (pair) => pair.toUpperCase())
}

/** Refuses `%25XX` (a percent sign encoded over an escape): it exists to be decoded twice. */
function refuseDoubleEncoding(uri: string): void {
  if (/%25[0-9A-Fa-f]{2}/.test(uri)) throw refuse(uri, 'double-encoding')
}

/**
 * What a URI is judged as: its normalised form, refusing double encoding too. Use this (not
 * `normaliseResourceUri` alone) wherever a client's URI is checked or forwarded.
 */
export function judgedUri(uri: string): string {
  refuseDoubleEncoding(uri)
  return normaliseResourceUri(uri)
}

/** A single-segment template value, as judged: no operator glob names it literally. */
const SEGMENT_VALUE = '%7B%7D'

/**
 * What a resource template (RFC 6570) is judged as: each expression replaced by a stand-in
 * value, then normalised. Expressions that may expand across `/` (`{+x}`, `{#x}`, `{/x}`, any
 * `x*`) stand in as two segments, so a glob matching one segment (`*`) does not grant them, and
 * `**` does. A rule therefore grants a template only when it grants where the template points.
 *
 * @example
 * judgedTemplate('file:///data/{name}') // 'file:///data/%7B%7D': matched by file:///data/*
 * judgedTemplate('file:///{+path}')     // 'file:///%7B%7D/%7B%7D': only by file:///**
 */
export function judgedTemplate(template: string): string {
  const probe = template.replace(/\{([^{}]*)\}/g, (_match, expression: string) => {
    const operator = expression.charAt(0)
    if (operator === '?' || operator === '&') return `?${SEGMENT_VALUE}=${SEGMENT_VALUE}`
    const spans = '+#/'.includes(operator) || expression.includes('*')
    return spans ? `${SEGMENT_VALUE}/${SEGMENT_VALUE}` : SEGMENT_VALUE
  })
  if (/[{}]/.test(probe)) throw refuse(template, 'not-absolute')
  return judgedUri(probe)
}

/** A resource URI or template, as judged (a template is recognised by its `{`). */
export function judgedResource(uriOrTemplate: string): string {
  return uriOrTemplate.includes('{') ? judgedTemplate(uriOrTemplate) : judgedUri(uriOrTemplate)
}

/** `judgedResource`, or undefined when the URI is refused (for filters: refused is hidden). */
export function tryJudged(uriOrTemplate: string): string | undefined {
  try {
    return judgedResource(uriOrTemplate)
  } catch {
    return undefined
  }
}

/** The methods whose `uri` parameter names a resource a client wants to reach. */
const URI_METHODS: ReadonlySet<string> = new Set([
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
])

/**
 * `request` with every resource URI it names in its judged form (`judge`), so that policies
 * judge exactly what the relay forwards. A URI without a judged form is left as sent: resolving
 * its route refuses it (and a listen stream leaves it out of its acknowledgement).
 */
export function withJudgedUris(request: Request, judge: (uri: string) => string): Request {
  const params = request.params
  if (!params) return request
  const tryJudge = (uri: unknown) => {
    if (typeof uri !== 'string') return uri
    try {
      return judge(uri)
    } catch {
      return uri
    }
  }
  if (URI_METHODS.has(request.method) && typeof params.uri === 'string') {
    return { ...request, params: { ...params, uri: tryJudge(params.uri) as string } }
  }
  const notifications = params.notifications
  if (
    request.method === 'subscriptions/listen' &&
    isPlainObject(notifications) &&
    Array.isArray(notifications.resourceSubscriptions)
  ) {
    const resourceSubscriptions = notifications.resourceSubscriptions.map(tryJudge)
    return {
      ...request,
      params: { ...params, notifications: { ...notifications, resourceSubscriptions } },
    }
  }
  return request
}

/** Schemes whose host the URL parser lower-cases (WHATWG "special" schemes). */
const SPECIAL_SCHEMES: ReadonlySet<string> = new Set(['file', 'http', 'https', 'ws', 'wss', 'ftp'])

/**
 * A URI glob written the way URIs are judged: its scheme lower-cased, and its host too when
 * the scheme's host is case-insensitive (`file://R/public/**` matches `file://r/public/a`).
 * A namespace prefix (`files+file:`) is kept as written, like in URIs. Globs without a scheme
 * (`**` + `/private/**`) are unchanged.
 */
export function globForJudgedUris(glob: string): string {
  const split = splitScheme(glob)
  if (split) return `${split.prefix}+${globForJudgedUris(split.inner)}`
  const parts = /^([A-Za-z][A-Za-z0-9.-]*):(\/\/[^/?#]*)?/.exec(glob)
  if (!parts) return glob
  const scheme = parts[1]!.toLowerCase()
  const authority = parts[2] ?? ''
  const host = SPECIAL_SCHEMES.has(scheme) ? authority.toLowerCase() : authority
  return `${scheme}:${host}${glob.slice(parts[0].length)}`
}

/**
 * Compiles a virtual server's resource include/exclude globs over judged URIs. `forms` are
 * the spellings of one URI a glob may name (the upstream's own and the namespaced one).
 * Excludes match case-insensitively, so `/Private/` cannot slip past an exclude of `private`
 * folders on a server whose paths ignore case; includes stay case-sensitive, so a changed case
 * is never admitted by them either (ADR 020). `*` stays within a segment, `**` crosses `/`.
 */
export function compileUriFilter(
  include?: readonly string[],
  exclude?: readonly string[],
): (forms: readonly string[]) => boolean {
  const included =
    include === undefined ? undefined : globs(include.map(globForJudgedUris), { dot: true })
  const excluded =
    exclude === undefined || exclude.length === 0
      ? undefined
      : globs(exclude.map(globForJudgedUris), { dot: true, nocase: true })
  return (forms) => {
    if (excluded && forms.some((f) => excluded(f))) return false
    return included === undefined || forms.some((f) => included(f))
  }
}

function globs(patterns: string[], options: picomatch.PicomatchOptions): (uri: string) => boolean {
  return patterns.length === 0 ? () => false : picomatch(patterns, options)
}
