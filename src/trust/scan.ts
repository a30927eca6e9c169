/**
 * Poisoning and collision checks over what upstreams advertise. Text an upstream writes reaches
 * the model as trusted context, so anything invisible to a reviewer, addressed to the model,
 * pointing at another server's tools or imitating another server's names is reported, each
 * finding with a severity the upstream's `trust.scan` policy acts on.
 */
import { isHiddenCharacter, nameProblem } from '../protocol/item-names.ts'
import type { Finding, ScannedUpstream, ScanRule, Severity } from './findings.ts'
import { imitationFindings } from './imitation.ts'
import type { SurfaceItem } from './surface.ts'

/** Longest description (or other text field) that is not reported as oversized. */
export const MAX_TEXT_LENGTH = 2048

const TAGS = /[\u{e0000}-\u{e007f}]/gu
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u
const INVISIBLE =
  /[\u00ad\u115f\u1160\u180e\u200b-\u200d\u2060-\u2064\u3164\ufeff\uffa0]|[\u{e0100}-\u{e01ef}]/u
/** C0 controls other than tab, line feed and carriage return, and DEL. */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || c === 0x7f) return true
  }
  return false
}

/** Phrases addressed to the model rather than describing the tool to it. */
const DIRECTIVES: readonly { pattern: RegExp; what: string; severity?: Severity }[] = [
  {
    pattern:
      /\b(ignore|disregard|forget)\b.{0,30}\b(previous|prior|above|earlier|other|all)\b.{0,20}\b(instructions?|rules|prompts?|guidelines)/i,
    what: 'tells the model to ignore its instructions',
  },
  {
    pattern:
      /\b(do not|don't|never)\b.{0,40}\b(tell|inform|mention|reveal|show|notify|alert)\b.{0,30}\buser\b/i,
    what: 'tells the model to keep something from the user',
  },
  {
    pattern:
      /\b((hide|conceal)\b.{0,40}\bfrom (the )?user|secretly|without (the )?user('s)? (knowledge|noticing|consent))\b/i,
    what: 'asks for secrecy toward the user',
  },
  {
    pattern: /<\/?\s*(important|system|instructions?|secret|admin)\s*>/i,
    what: 'contains a pseudo-system tag',
  },
  {
    pattern:
      /(\.ssh\b|id_rsa|id_ed25519|\.env\b|\/etc\/passwd|\.aws\/credentials|\.netrc|mcp\.json|claude_desktop_config)/i,
    what: 'refers to credential files',
  },
  {
    // Tools may legitimately handle keys and passwords: reported, never quarantined alone.
    pattern: /\b(private keys?|api[_ -]?keys?|passwords?|secret keys?|access tokens?)\b/i,
    what: 'mentions secrets',
    severity: 'medium',
  },
  {
    pattern:
      /\b(send|post|upload|forward|exfiltrate|transmit|leak|email)\b.{0,60}\b(to|at)\b.{0,20}(https?:\/\/|[\w.+-]+@[\w-]+\.|this (url|address|endpoint|server))/i,
    what: 'asks to send data elsewhere',
  },
  {
    pattern:
      /\b(before|instead of) (using|calling|running) (this|any|the other|another) tool\b.{0,80}\b(must|always|first)\b/i,
    what: 'imposes steps on the use of other tools',
  },
]

const URL_PATTERN = /\b(?:https?|ftp|data|javascript):[^\s"'<>)\]]+/gi
const SHORTENERS = /^(bit\.ly|tinyurl\.com|t\.co|goo\.gl|is\.gd|ow\.ly|buff\.ly|rb\.gy|cutt\.ly)$/i
const DROP_SITES =
  /(^|\.)(pastebin\.com|webhook\.site|requestbin\.|ngrok\.io|ngrok-free\.app|pipedream\.net|interact\.sh|burpcollaborator\.net)/i

/** Scans every item of every upstream, and the names across upstreams. */
export function scanSurfaces(upstreams: readonly ScannedUpstream[]): Finding[] {
  const findings: Finding[] = []
  for (const u of upstreams) {
    const others = otherToolNames(upstreams, u.upstream)
    for (const item of u.items) findings.push(...scanItem(u.upstream, item, others))
  }
  findings.push(...imitationFindings(upstreams))
  return findings
}

function otherToolNames(upstreams: readonly ScannedUpstream[], self: string): Map<string, string> {
  const names = new Map<string, string>()
  for (const u of upstreams) {
    if (u.upstream === self) continue
    for (const item of u.items) if (item.kind === 'tool') names.set(item.name, u.upstream)
  }
  return names
}

/** Checks one item's own text; `others` maps other upstreams' tool names to their upstream. */
export function scanItem(
  upstream: string,
  item: SurfaceItem,
  others: ReadonlyMap<string, string> = new Map(),
): Finding[] {
  const findings: Finding[] = []
  const add = (rule: ScanRule, severity: Severity, message: string, field?: string) =>
    findings.push({
      upstream,
      kind: item.kind,
      name: item.name,
      key: item.key,
      rule,
      severity,
      message,
      ...(field === undefined ? {} : { field }),
    })
  if (item.kind === 'tool' || item.kind === 'prompt') {
    const problem = nameProblem(item.name)
    if (problem !== undefined) {
      // Held back from every client by the catalog; an escape sequence or newline in a name is
      // an attempt on the terminals and prompts that show it, anything else a sloppy name.
      const hidden = [...item.name].some((c) => isHiddenCharacter(c.codePointAt(0)!))
      add(
        'invalid-name',
        hidden ? 'high' : 'medium',
        `${problem}; held back from clients (rename it in the virtual server to expose it)`,
        'name',
      )
    }
  }
  const seen = new Set<string>()
  const once = (rule: ScanRule, severity: Severity, message: string, field: string) => {
    const id = `${rule}\u0000${message}`
    if (seen.has(id)) return
    seen.add(id)
    add(rule, severity, message, field)
  }
  for (const [field, text] of strings(item.definition, '')) {
    const where = field || item.kind
    const tags = text.match(TAGS)
    if (tags) {
      const hidden = tags.map((t) => String.fromCodePoint(t.codePointAt(0)! - 0xe0000)).join('')
      once(
        'hidden-unicode',
        'critical',
        `Unicode tag characters hide text: "${clip(hidden)}"`,
        where,
      )
    }
    if (BIDI.test(text))
      once('hidden-unicode', 'high', 'bidirectional control characters reorder the text', where)
    if (INVISIBLE.test(text))
      once('hidden-unicode', 'high', 'invisible characters (zero-width or fillers)', where)
    if (hasControl(text)) once('hidden-unicode', 'medium', 'control characters', where)
    const plain = text.replace(TAGS, '')
    for (const d of DIRECTIVES) {
      const m = d.pattern.exec(plain)
      if (m) once('model-directive', d.severity ?? 'high', `${d.what}: "${clip(m[0])}"`, where)
    }
    for (const [name, owner] of others) {
      if (!distinctive(name)) continue
      const word = new RegExp(`(^|[^\\w-])${escapeRegExp(name)}($|[^\\w-])`)
      if (word.test(plain))
        once('shadowing', 'high', `mentions tool "${name}" of upstream "${owner}"`, where)
    }
    for (const url of plain.match(URL_PATTERN) ?? []) {
      const why = suspiciousUrl(url)
      if (why) once('suspicious-url', 'medium', `${why}: ${clip(url)}`, where)
    }
    if (text.length > MAX_TEXT_LENGTH)
      once('oversized', 'medium', `${text.length} characters (limit ${MAX_TEXT_LENGTH})`, where)
  }
  return findings
}

/** Names common enough to appear as plain words ("search", "read") are not treated as references. */
function distinctive(name: string): boolean {
  return name.length >= 4 && (/[_\-.]/.test(name) || /[a-z][A-Z]/.test(name) || name.length >= 10)
}

function suspiciousUrl(text: string): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'malformed URL'
  }
  if (url.protocol === 'data:' || url.protocol === 'javascript:') return `${url.protocol} URL`
  const host = url.hostname
  if (url.username || url.password) return 'URL with credentials or a misleading "@"'
  if (/^\d+\.\d+\.\d+\.\d+$/.test(host) || host.startsWith('[')) return 'URL to a raw IP address'
  if (host.split('.').some((label) => label.startsWith('xn--'))) return 'punycode host name'
  if (SHORTENERS.test(host)) return 'link shortener'
  if (DROP_SITES.test(host)) return 'request-capture or paste site'
  if (url.protocol === 'http:' && host !== 'localhost') return 'unencrypted http URL'
  return undefined
}

function* strings(value: unknown, path: string): Generator<[string, string]> {
  if (typeof value === 'string') yield [path, value]
  else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) yield* strings(value[i], `${path}[${i}]`)
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      // A JSON Schema dialect URI (`$schema`) names a standard; it is not text for the model.
      if (k === '$schema') continue
      yield* strings(v, path ? `${path}.${k}` : k)
    }
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function clip(text: string, width = 80): string {
  const one = text.replace(/\s+/g, ' ')
  return one.length > width ? `${one.slice(0, width - 1)}…` : one
}
