/**
 * The text an MCP result carries, for assertions: a tool result's `content` blocks (a list or
 * one block), or a prompt result's first message's content. Blocks without text count as empty.
 */
export function textOf(result: unknown): string {
  const r = result as { content?: unknown; messages?: { content?: unknown }[] }
  const content = r.content ?? r.messages?.[0]?.content
  const blocks = (Array.isArray(content) ? content : [content]) as (
    | { text?: unknown }
    | undefined
  )[]
  return blocks.map((block) => String(block?.text ?? '')).join('')
}
