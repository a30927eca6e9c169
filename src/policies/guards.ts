/**
 * The `guards` policy: checks what goes into a tool and what comes out of it.
 * - Arguments are validated against the tool's `inputSchema` before the call is forwarded
 *   (`enforce`: refused with ERR_INVALID_PARAMS; `warn`: logged and forwarded).
 * - `structuredContent` is validated against the tool's `outputSchema` (`enforce`: replaced by
 *   ERR_RESULT_INVALID; `warn`: logged). A result with `isError: true` is never validated: the
 *   upstream's own error reaches the client unchanged.
 * - Secrets in the result are redacted (redaction.ts), and the count logged per call.
 * - A result over `maxResultBytes` or `maxResultTokens` (estimated as characters / 4) is cut
 *   with a note, or refused with ERR_RESULT_TOO_LARGE.
 * Schemas are compiled once per tool definition object: a catalog keeps its definitions until
 * they change (and pins decide when that is), so the cache follows the pinned definition.
 */

import { toolDefinition } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import { ajv } from '../common/lazy-deps.ts'
import type { GuardsConfig } from '../config/config.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { Result } from '../protocol/model.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'
import { type RedactionCounts, Redactor } from './redaction.ts'

/** A compiled schema: the error list when `value` does not conform, undefined when it does. */
type Check = (value: unknown) => readonly string[] | undefined

/** Characters per token in the size estimate: a common rule of thumb for English and JSON. */
export const CHARS_PER_TOKEN = 4

export function guards(config: GuardsConfig): Policy {
  const validates = config.arguments !== 'off' || config.output !== 'off'
  const compiler = validates ? new SchemaCompiler() : undefined
  const redactor = config.redact ? new Redactor(config.redactPatterns) : undefined
  const sized = config.maxResultBytes !== undefined || config.maxResultTokens !== undefined
  return {
    name: 'guards',
    async handle(call: Call, next: Next): Promise<Reply> {
      const { request, route } = call
      if (request.method !== 'tools/call' || route.kind !== 'unicast') return await next(call)
      const exposed = String(request.params?.name)
      const tool = toolDefinition(route.catalog, request.params?.name)
      if (compiler && tool && config.arguments !== 'off') {
        const args = request.params?.arguments ?? {}
        const errors = compiler.check(tool, 'inputSchema')(args)
        if (errors) {
          const details = { guard: 'arguments', tool: exposed, errors }
          if (config.arguments === 'enforce') {
            throw new BarbicanError(
              'ERR_INVALID_PARAMS',
              `Arguments of "${exposed}" do not match its inputSchema: ${errors.join('; ')}`,
              { data: details },
            )
          }
          call.log.warn('arguments do not match the inputSchema; forwarded (warn mode)', details)
        }
      }
      const reply = await next(call)
      if (reply.kind !== 'result' || reply.resultType !== 'complete') return reply
      let result = reply.result
      if (compiler && tool && config.output !== 'off' && result.isError !== true) {
        const errors = outputErrors(compiler, tool, result)
        if (errors) {
          const details = { guard: 'output', tool: exposed, errors }
          if (config.output === 'enforce') {
            throw new BarbicanError(
              'ERR_RESULT_INVALID',
              `The result of "${exposed}" does not match its outputSchema: ${errors.join('; ')}`,
              { data: details },
            )
          }
          call.log.warn('structuredContent does not match the outputSchema (warn mode)', details)
        }
      }
      if (redactor) {
        const counts: RedactionCounts = new Map()
        result = redactor.redactDeep(result, counts) as JsonObject
        if (counts.size > 0) {
          const kinds = Object.fromEntries(counts)
          const count = [...counts.values()].reduce((a, b) => a + b, 0)
          call.log.info('redacted secrets in a result', { tool: exposed, count, kinds })
          // The audit record of the call carries the counts too.
          call.decisions?.push({ policy: 'guards', effect: 'allow', redactions: kinds })
        }
      }
      if (sized) result = limitSize(result, config, exposed, call.log.warn.bind(call.log))
      return result === reply.result ? reply : ({ ...reply, result } satisfies Result)
    },
  }
}

function outputErrors(
  compiler: SchemaCompiler,
  tool: JsonObject,
  result: JsonObject,
): readonly string[] | undefined {
  if (!isPlainObject(tool.outputSchema)) return undefined
  if (result.structuredContent === undefined) {
    return ['the tool declares an outputSchema but the result has no structuredContent']
  }
  return compiler.check(tool, 'outputSchema')(result.structuredContent)
}

/** Compiles each tool definition's schemas once, while the definition object lives. */
class SchemaCompiler {
  readonly #ajv = new (ajv())({ strict: false, allErrors: true, validateFormats: false })
  readonly #cache = new WeakMap<JsonObject, Map<string, Check>>()

  check(tool: JsonObject, key: 'inputSchema' | 'outputSchema'): Check {
    let byKey = this.#cache.get(tool)
    if (byKey === undefined) {
      byKey = new Map()
      this.#cache.set(tool, byKey)
    }
    let check = byKey.get(key)
    if (check === undefined) {
      check = this.#compile(tool[key])
      byKey.set(key, check)
    }
    return check
  }

  #compile(schema: unknown): Check {
    if (schema === undefined) return () => undefined
    if (!isPlainObject(schema) && typeof schema !== 'boolean') {
      return () => ['the tool declares a schema that is not a JSON Schema']
    }
    // Draft-07 schemas (common from zod-to-json-schema) name their dialect; the keywords they
    // use validate the same under 2020-12, and Ajv would refuse the unknown meta-schema.
    const { $schema: _dialect, ...rest } = isPlainObject(schema) ? schema : { $schema: undefined }
    let validate: ReturnType<InstanceType<ReturnType<typeof ajv>>['compile']>
    try {
      validate = this.#ajv.compile(isPlainObject(schema) ? rest : schema)
    } catch (err) {
      // A schema that cannot be compiled fails closed: nothing can be shown to conform to it.
      const reason = `the tool's schema cannot be compiled: ${(err as Error).message}`
      return () => [reason]
    }
    return (value) => {
      if (validate(value)) return undefined
      return (validate.errors ?? []).map(
        (e) => `${e.instancePath || '/'} ${e.message ?? 'invalid'}`,
      )
    }
  }
}

/** The size of a result as both limits measure it. */
function measure(result: JsonObject): { bytes: number; chars: number } {
  const text = JSON.stringify(result)
  return { bytes: Buffer.byteLength(text), chars: text.length }
}

/**
 * `result` within the size limits: unchanged when it fits; else refused (`error`), or cut
 * (`truncate`): text blocks are shortened from the last one back, then other content blocks
 * dropped from the end, and a note says what was cut. A result still too large after that
 * (its structuredContent alone is over the limit) is refused.
 */
function limitSize(
  result: JsonObject,
  config: GuardsConfig,
  tool: string,
  warn: (message: string, fields: Record<string, unknown>) => void,
): JsonObject {
  const maxBytes = config.maxResultBytes ?? Number.POSITIVE_INFINITY
  const maxChars = (config.maxResultTokens ?? Number.POSITIVE_INFINITY) * CHARS_PER_TOKEN
  const size = measure(result)
  if (size.bytes <= maxBytes && size.chars <= maxChars) return result
  const limits = {
    tool,
    bytes: size.bytes,
    estimatedTokens: Math.ceil(size.chars / CHARS_PER_TOKEN),
    ...(config.maxResultBytes === undefined ? {} : { maxResultBytes: config.maxResultBytes }),
    ...(config.maxResultTokens === undefined ? {} : { maxResultTokens: config.maxResultTokens }),
  }
  const tooLarge = () =>
    new BarbicanError(
      'ERR_RESULT_TOO_LARGE',
      `The result of "${tool}" is ${size.bytes} bytes (about ${limits.estimatedTokens} tokens), over the configured limit`,
      { data: limits },
    )
  if (config.oversize === 'error' || !Array.isArray(result.content)) throw tooLarge()
  const note = {
    type: 'text',
    text: `[Barbican: this result was cut from ${size.bytes} bytes (about ${limits.estimatedTokens} tokens) to fit the gateway's limit]`,
  }
  const content: unknown[] = [...result.content, note]
  let cut: JsonObject = { ...result, content }
  for (;;) {
    const now = measure(cut)
    const excess = Math.max(now.bytes - maxBytes, now.chars - maxChars)
    if (excess <= 0) break
    // The last block before the note that still holds something.
    const index = content.length - 2
    if (index < 0) throw tooLarge()
    const block = content[index]
    if (isPlainObject(block) && block.type === 'text' && typeof block.text === 'string') {
      if (block.text.length > excess) {
        // Cut by characters; each removes at least one byte, and escapes only add to the saving.
        content[index] = { ...block, text: block.text.slice(0, block.text.length - excess) }
        cut = { ...result, content }
        continue
      }
    }
    content.splice(index, 1)
    cut = { ...result, content }
  }
  warn('cut an oversize result', limits)
  return cut
}
