/**
 * Finds secrets in text a tool returned and replaces each with `[REDACTED:<kind>]`: private key
 * blocks, AWS access key ids, GitHub tokens, JWTs and bearer tokens, plus the operator's own
 * patterns. Counts every replacement so each call can log how many it hid.
 */

export interface SecretPattern {
  readonly kind: string
  readonly pattern: RegExp
}

/** The built-in patterns; chosen to be specific, so ordinary text is never redacted. */
export const BUILT_IN_SECRETS: readonly SecretPattern[] = [
  {
    kind: 'private-key',
    pattern:
      /-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY)-----[\s\S]*?-----END \1-----/g,
  },
  { kind: 'aws-access-key', pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g },
  {
    kind: 'github-token',
    pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g,
  },
  { kind: 'jwt', pattern: /\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g },
  { kind: 'bearer', pattern: /\bBearer\s+[A-Za-z0-9\-._~+/]{16,}=*/gi },
]

/** Counts by kind, filled in as text is redacted. */
export type RedactionCounts = Map<string, number>

export class Redactor {
  readonly #patterns: readonly SecretPattern[]

  /** `extra`: regular expressions (source text), each reported as kind `custom-N`. */
  constructor(extra: readonly string[] = []) {
    this.#patterns = [
      ...BUILT_IN_SECRETS,
      ...extra.map((source, i) => ({ kind: `custom-${i + 1}`, pattern: new RegExp(source, 'g') })),
    ]
  }

  /** `text` with every secret replaced; `counts` gains one per replacement. */
  redact(text: string, counts: RedactionCounts): string {
    let out = text
    for (const { kind, pattern } of this.#patterns) {
      pattern.lastIndex = 0
      if (!pattern.test(out)) continue
      pattern.lastIndex = 0
      out = out.replace(pattern, () => {
        counts.set(kind, (counts.get(kind) ?? 0) + 1)
        return `[REDACTED:${kind}]`
      })
    }
    return out
  }

  /**
   * Every string inside `value` redacted (objects and arrays copied only where they change),
   * except base64 payloads: `blob` of resource contents, `data` of image and audio blocks.
   */
  redactDeep(value: unknown, counts: RedactionCounts): unknown {
    if (typeof value === 'string') return this.redact(value, counts)
    if (Array.isArray(value)) {
      let changed = false
      const out = value.map((item) => {
        const next = this.redactDeep(item, counts)
        if (next !== item) changed = true
        return next
      })
      return changed ? out : value
    }
    if (value !== null && typeof value === 'object') {
      let changed = false
      const out: Record<string, unknown> = {}
      const binary = (value as { type?: unknown }).type
      for (const [key, item] of Object.entries(value)) {
        // Base64 payloads are not text: a pattern matching inside one would corrupt the file.
        const opaque =
          key === 'blob' || (key === 'data' && (binary === 'image' || binary === 'audio'))
        const next = opaque ? item : this.redactDeep(item, counts)
        if (next !== item) changed = true
        out[key] = next
      }
      return changed ? out : value
    }
    return value
  }
}
