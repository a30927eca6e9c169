/**
 * File text to a plain value, keeping a way back from key paths to line numbers so every
 * validation message can point at the line to fix. One YAML parser reads both formats (JSON is
 * YAML); JSON files may carry the comments and trailing commas of VS Code's JSONC.
 */
import { isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from 'yaml'
import { ConfigError, type KeyPath } from './config-error.ts'

/** A parsed file: its value, and the 1-based position of the node at (or nearest above) a path. */
export interface ParsedText {
  readonly value: unknown
  locate(path: KeyPath): { line: number; column: number } | undefined
}

/**
 * Parses YAML or JSON(C). `json` selects comment stripping, which YAML must not get (`#` is
 * YAML's comment and `//` may begin a URL). Duplicate keys are errors: in a config the second of
 * two keys silently winning is always a mistake.
 */
export function parseText(text: string, options: { json: boolean; file?: string }): ParsedText {
  const source = options.json ? stripJsonComments(text) : text
  const lineCounter = new LineCounter()
  const doc = parseDocument(source, {
    lineCounter,
    merge: true,
    uniqueKeys: true,
    prettyErrors: false,
    strict: true,
  })
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((error) => {
        const pos = lineCounter.linePos(error.pos[0])
        return {
          path: [],
          message: `${options.json ? 'JSON' : 'YAML'} syntax error: ${firstLine(error.message)}`,
          line: pos.line,
          column: pos.col,
        }
      }),
      { file: options.file },
    )
  }
  const value = doc.toJS({ maxAliasCount: 1000 }) as unknown
  return {
    value,
    locate(path) {
      let node: unknown = doc.contents
      let found: Node | undefined = isNode(node) ? node : undefined
      for (const part of path) {
        node = childOf(node, part)
        if (!isNode(node)) break
        found = node
      }
      const start = found?.range?.[0]
      if (start === undefined) return undefined
      const pos = lineCounter.linePos(start)
      return { line: pos.line, column: pos.col }
    },
  }
}

function isNode(value: unknown): value is Node {
  return isScalar(value) || isMap(value) || isSeq(value)
}

function childOf(node: unknown, part: string | number): unknown {
  if (isMap(node)) {
    const pair = node.items.find((item) => isPair(item) && keyText(item.key) === String(part))
    return pair?.value
  }
  if (isSeq(node) && typeof part === 'number') return node.items[part]
  return undefined
}

function keyText(key: unknown): string | undefined {
  if (isScalar(key)) return String(key.value)
  return typeof key === 'string' ? key : undefined
}

function firstLine(message: string): string {
  return (message.split('\n')[0] ?? message).replace(/ at line \d+, column \d+:?$/, '')
}

/**
 * Blanks out `//` and `/* *\/` comments outside strings, keeping every newline and offset so
 * positions still match the file. (Trailing commas need no help: YAML flow collections allow them.)
 */
export function stripJsonComments(text: string): string {
  let out = ''
  let i = 0
  let inString = false
  while (i < text.length) {
    const c = text[i] as string
    if (inString) {
      out += c
      if (c === '\\') {
        out += text[i + 1] ?? ''
        i += 2
        continue
      }
      if (c === '"') inString = false
      i++
    } else if (c === '"') {
      inString = true
      out += c
      i++
    } else if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i)
      const stop = end < 0 ? text.length : end
      out += ' '.repeat(stop - i)
      i = stop
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2)
      const stop = end < 0 ? text.length : end + 2
      out += text.slice(i, stop).replace(/[^\n]/g, ' ')
      i = stop
    } else {
      out += c
      i++
    }
  }
  return out
}
