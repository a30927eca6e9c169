/**
 * Resources and prompts as tools, for hosts that support only tools (`adapt: tools-only`, ADR
 * 076): the definitions of `list_resources`, `read_resource` and `get_prompt`, and how the
 * results of `resources/list`, `resources/read` and `prompts/get` become tool results. Pure: the
 * session runs each as the method it stands for, through the same route and policy chain.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'

export const LIST_RESOURCES = 'list_resources'
export const READ_RESOURCE = 'read_resource'
export const GET_PROMPT = 'get_prompt'

/** The names of the tools `adapt: tools-only` adds. */
export const ADAPTED_TOOLS: ReadonlySet<string> = new Set([
  LIST_RESOURCES,
  READ_RESOURCE,
  GET_PROMPT,
])

/** Prompts listed in `get_prompt`'s description at most; the rest are still reachable by name. */
const LISTED_PROMPTS = 50

/** The three tools, described for `catalog` (get_prompt names the prompts there are). */
export function adaptedTools(catalog: Catalog): JsonObject[] {
  const prompts = catalog.prompts.slice(0, LISTED_PROMPTS).map((p) => {
    const args = Array.isArray(p.arguments)
      ? p.arguments
          .filter(isPlainObject)
          .map((a) => `${String(a.name)}${a.required === true ? '' : '?'}`)
      : []
    const about = typeof p.description === 'string' ? `: ${p.description.split('\n')[0]}` : ''
    return `- ${String(p.name)}(${args.join(', ')})${about}`
  })
  const more = catalog.prompts.length - prompts.length
  if (more > 0) prompts.push(`- … and ${more} more`)
  return [
    {
      name: LIST_RESOURCES,
      title: 'List resources',
      description:
        'Lists the resources (files, records, documents) this server offers, and the URI ' +
        'templates of the ones it can read on demand. Read one with read_resource.',
      inputSchema: {
        type: 'object',
        properties: {
          cursor: {
            type: 'string',
            description: 'The nextCursor of a previous call, for the next page.',
          },
        },
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    {
      name: READ_RESOURCE,
      title: 'Read a resource',
      description:
        'Reads a resource by URI: one from list_resources, a URI template filled in, or the ' +
        'URI of a resource link in a tool result.',
      inputSchema: {
        type: 'object',
        properties: { uri: { type: 'string', description: 'The URI of the resource.' } },
        required: ['uri'],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    {
      name: GET_PROMPT,
      title: 'Get a prompt',
      description: [
        'Gets a prompt (a prepared message template) filled in with its arguments.',
        ...(prompts.length > 0 ? ['Prompts:', ...prompts] : ['This server has no prompts.']),
      ].join('\n'),
      inputSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'The name of the prompt.' },
          arguments: {
            type: 'object',
            description: 'Its arguments, by name (strings).',
            additionalProperties: { type: 'string' },
          },
        },
        required: ['name'],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
  ]
}

/** A tool result of one text block plus `structuredContent` (the same data). */
function structured(data: JsonObject): JsonObject {
  return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data }
}

/** `list_resources`: both lists (templates on the first page only) and the next cursor. */
export function listResourcesResult(
  resources: JsonObject,
  templates: readonly unknown[] | undefined,
): JsonObject {
  const data: JsonObject = {
    resources: Array.isArray(resources.resources) ? resources.resources : [],
  }
  if (templates !== undefined) data.resourceTemplates = templates
  if (typeof resources.nextCursor === 'string') data.nextCursor = resources.nextCursor
  return structured(data)
}

/** `read_resource`: each content of the resource as an embedded resource block. */
export function readResourceResult(read: JsonObject): JsonObject {
  const contents = Array.isArray(read.contents) ? read.contents.filter(isPlainObject) : []
  return { content: contents.map((resource) => ({ type: 'resource', resource })) }
}

/** `get_prompt`: the description, then each message's content, its role first. */
export function getPromptResult(prompt: JsonObject): JsonObject {
  const content: JsonObject[] = []
  if (typeof prompt.description === 'string' && prompt.description !== '') {
    content.push({ type: 'text', text: prompt.description })
  }
  const messages = Array.isArray(prompt.messages) ? prompt.messages.filter(isPlainObject) : []
  for (const message of messages) {
    const role = String(message.role)
    const block = message.content
    if (isPlainObject(block) && block.type === 'text' && typeof block.text === 'string') {
      content.push({ type: 'text', text: `[${role}] ${block.text}` })
    } else if (isPlainObject(block)) {
      content.push({ type: 'text', text: `[${role}]` }, block)
    }
  }
  return { content }
}

/**
 * A tool result whose resource links and embedded resources name upstream URIs, with each URI
 * replaced by the one a client reads it by on this server (`exposed`).
 */
export async function withExposedUris(
  result: JsonObject,
  exposed: (uri: string) => Promise<string>,
): Promise<JsonObject> {
  if (!Array.isArray(result.content)) return result
  let changed = false
  const content = await Promise.all(
    result.content.map(async (block: unknown) => {
      if (!isPlainObject(block)) return block
      if (block.type === 'resource_link' && typeof block.uri === 'string') {
        const uri = await exposed(block.uri)
        if (uri === block.uri) return block
        changed = true
        return { ...block, uri }
      }
      const resource = block.resource
      if (
        block.type === 'resource' &&
        isPlainObject(resource) &&
        typeof resource.uri === 'string'
      ) {
        const uri = await exposed(resource.uri)
        if (uri === resource.uri) return block
        changed = true
        return { ...block, resource: { ...resource, uri } }
      }
      return block
    }),
  )
  return changed ? { ...result, content } : result
}
