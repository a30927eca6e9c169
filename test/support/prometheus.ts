/**
 * A small parser of the Prometheus text exposition format (version 0.0.4), strict enough to
 * fail a test on malformed output: every sample line must parse, every sample must belong to a
 * family declared by `# TYPE`, and label values are unescaped (`\\`, `\"`, `\n`).
 */

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Exposition {
  /** Family name → type (counter, gauge, histogram, …). */
  readonly types: ReadonlyMap<string, string>
  readonly help: ReadonlyMap<string, string>
  readonly samples: readonly Sample[]
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>()
  const help = new Map<string, string>()
  const samples: Sample[] = []
  const lines = text.split('\n')
  lines.forEach((line, index) => {
    const where = `line ${index + 1}: ${line}`
    if (line.trim() === '') return
    if (line.startsWith('#')) {
      const meta = /^# (TYPE|HELP) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line)
      if (!meta) {
        if (/^# (TYPE|HELP)/.test(line)) throw new Error(`malformed ${where}`)
        return
      }
      const [, kind, name, rest] = meta as unknown as [string, string, string, string]
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) {
          throw new Error(`unknown type in ${where}`)
        }
        if (types.has(name)) throw new Error(`second TYPE for ${name} at ${where}`)
        types.set(name, rest)
      } else {
        help.set(name, rest)
      }
      return
    }
    const name = NAME.exec(line)?.[0]
    if (!name) throw new Error(`no metric name at ${where}`)
    let rest = line.slice(name.length)
    const labels: Record<string, string> = {}
    if (rest.startsWith('{')) {
      rest = rest.slice(1)
      while (!rest.startsWith('}')) {
        const label = LABEL_NAME.exec(rest)?.[0]
        if (!label || rest[label.length] !== '=' || rest[label.length + 1] !== '"') {
          throw new Error(`malformed label at ${where}`)
        }
        rest = rest.slice(label.length + 2)
        let value = ''
        for (;;) {
          const c = rest[0]
          if (c === undefined) throw new Error(`unterminated label value at ${where}`)
          rest = rest.slice(1)
          if (c === '"') break
          if (c === '\\') {
            const next = rest[0]
            rest = rest.slice(1)
            if (next === 'n') value += '\n'
            else if (next === '\\' || next === '"') value += next
            else throw new Error(`bad escape at ${where}`)
          } else {
            value += c
          }
        }
        if (label in labels) throw new Error(`repeated label ${label} at ${where}`)
        labels[label] = value
        if (rest.startsWith(',')) rest = rest.slice(1)
        else if (!rest.startsWith('}')) throw new Error(`expected , or } at ${where}`)
      }
      rest = rest.slice(1)
    }
    const fields = rest.trim().split(/\s+/)
    if (!rest.startsWith(' ') || fields.length < 1 || fields.length > 2) {
      throw new Error(`malformed value at ${where}`)
    }
    const value = parseValue(fields[0]!)
    if (value === undefined) throw new Error(`bad value at ${where}`)
    const family = familyOf(name, types)
    if (family === undefined) throw new Error(`sample of an undeclared family at ${where}`)
    samples.push({ name, labels, value })
  })
  return { types, help, samples }
}

/** Go's ParseFloat, as Prometheus reads values: NaN and Inf in any case (prom-client writes `Nan`). */
function parseValue(text: string): number | undefined {
  const lower = text.toLowerCase()
  if (lower === '+inf' || lower === 'inf') return Number.POSITIVE_INFINITY
  if (lower === '-inf') return Number.NEGATIVE_INFINITY
  if (lower === 'nan') return Number.NaN
  const value = Number(text)
  return text !== '' && !Number.isNaN(value) ? value : undefined
}

/** The declared family a sample belongs to (a histogram's `_bucket`, `_sum`, `_count`). */
function familyOf(name: string, types: ReadonlyMap<string, string>): string | undefined {
  if (types.has(name)) return name
  const base = name.replace(/_(bucket|sum|count)$/, '')
  return types.get(base) === 'histogram' || types.get(base) === 'summary' ? base : undefined
}

/** The samples named `name` whose labels include every one of `labels`. */
export function samplesOf(
  exposition: Exposition,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): Sample[] {
  return exposition.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )
}

/** The sum of the matching samples' values (0 when none match). */
export function sampleSum(
  exposition: Exposition,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number {
  return samplesOf(exposition, name, labels).reduce((sum, s) => sum + s.value, 0)
}
