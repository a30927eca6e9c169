/**
 * What each exposed tool costs a model in tokens (issue 22, ADR 051). A host puts every listed
 * tool into the model's context: its name, description and input schema, serialised as JSON. We
 * count exactly that text with a real tokenizer, gpt-tokenizer's `o200k_base` encoding (GPT-4o,
 * GPT-4.1, o-series); other models' tokenizers differ by some percent, which is close enough to
 * compare tools and budget a virtual server.
 *
 * The encoding's tables cost about 300 ms and tens of MB to load, so they are imported on first
 * use: `barbican check` and the admin console load them, a gateway that is never asked does not.
 */
import type { JsonObject } from '../protocol/jsonrpc.ts'

/** The encoding named in `check`, the console and docs. */
export const TOKEN_ENCODING = 'o200k_base'

type CountTokens = (text: string) => number

let counter: Promise<CountTokens> | undefined

/** The tokenizer, loaded once. */
export function loadTokenCounter(): Promise<CountTokens> {
  counter ??= import('gpt-tokenizer/encoding/o200k_base').then((m) => {
    // Text a server chose may contain `<|endoftext|>` and the like: counted as plain text,
    // never refused (the library throws on special tokens by default).
    const plain = { disallowedSpecial: new Set<string>() }
    return (text: string) => m.countTokens(text, plain)
  })
  return counter
}

/** What the model sees of a tool: name, description and input schema, as JSON. */
export function modelView(tool: JsonObject): string {
  const view: JsonObject = { name: tool.name ?? '' }
  if (tool.description !== undefined) view.description = tool.description
  if (tool.inputSchema !== undefined) view.inputSchema = tool.inputSchema
  return JSON.stringify(view)
}

export interface ToolCost {
  readonly name: string
  readonly tokens: number
}

/** The cost of each tool, in list order, and their sum. */
export async function toolCosts(
  tools: readonly JsonObject[],
): Promise<{ readonly tools: readonly ToolCost[]; readonly total: number }> {
  const count = await loadTokenCounter()
  let total = 0
  const costs = tools.map((tool) => {
    const tokens = count(modelView(tool))
    total += tokens
    return { name: String(tool.name), tokens }
  })
  return { tools: costs, total }
}

/** The warning for a virtual server over its budget, or undefined within it (or without one). */
export function overBudget(
  server: string,
  total: number,
  budget: number | undefined,
): string | undefined {
  if (budget === undefined || total <= budget) return undefined
  return (
    `virtual server "${server}" lists tools worth ${total} tokens (${TOKEN_ENCODING}), over its ` +
    `tokenBudget of ${budget}; hide or shorten tools, or raise servers.${server}.tokenBudget`
  )
}
