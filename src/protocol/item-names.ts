/**
 * MCP's rules for tool and prompt names (2025-11-25, SEP-986: 1–128 characters of A–Z a–z 0–9
 * `_` `-` `.`), applied to every name Barbican exposes, and how a name that breaks them is shown
 * to an operator without letting it drive the operator's terminal.
 */

/** Longest tool or prompt name Barbican exposes (MCP 2025-11-25 tool-name rules). */
export const MAX_NAME_LENGTH = 128

/**
 * Why a tool or prompt name may not reach clients, or `undefined` when it may. Clients render
 * names in terminals and paste them into prompts, so only the spec's tool-name alphabet passes:
 * an escape sequence, a newline or a lookalike letter never does.
 */
export function nameProblem(name: string): string | undefined {
  if (name === '') return 'the name is empty'
  let length = 0
  for (const char of name) {
    length++
    if (/[A-Za-z0-9_.-]/.test(char)) continue
    const code = char.codePointAt(0)!
    const u = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`
    return isHiddenCharacter(code)
      ? `the name contains a control or invisible character (${u})`
      : `the name contains ${u}, outside A-Z a-z 0-9 _ - .`
  }
  if (length > MAX_NAME_LENGTH)
    return `the name is ${length} characters long, over ${MAX_NAME_LENGTH}`
  return undefined
}

/** C0 and C1 controls, DEL, bidirectional controls, zero-width and other invisible characters. */
export function isHiddenCharacter(code: number): boolean {
  return (
    code < 0x20 ||
    (code >= 0x7f && code <= 0x9f) ||
    code === 0xad ||
    code === 0x061c ||
    code === 0x180e ||
    (code >= 0x200b && code <= 0x200f) ||
    (code >= 0x2028 && code <= 0x202e) ||
    (code >= 0x2060 && code <= 0x206f) ||
    code === 0xfeff ||
    (code >= 0xfff9 && code <= 0xfffb) ||
    (code >= 0xe0000 && code <= 0xe0fff)
  )
}

/**
 * A name as an operator may safely read it in a terminal or log: hidden characters spelled as
 * `\u{…}` escapes, and a long name cut with its length given.
 */
export function printableName(name: string, width = 80): string {
  let out = ''
  for (const char of name) {
    const code = char.codePointAt(0)!
    out += isHiddenCharacter(code) || code === 0x5c ? `\\u{${code.toString(16)}}` : char
  }
  const chars = [...out]
  return chars.length > width
    ? `${chars.slice(0, width).join('')}… (${[...name].length} characters)`
    : out
}
