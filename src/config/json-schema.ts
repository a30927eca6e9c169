/**
 * The JSON Schema of the native format, generated from the zod schema so the two cannot drift.
 * Editors use it for completion and inline documentation (`$schema` in JSON, or the
 * `# yaml-language-server: $schema=…` comment in YAML).
 */
import { z } from 'zod'
import { nativeConfigSchema } from './schema.ts'

/**
 * Builds the JSON Schema (draft 2020-12) describing the file as written: defaulted keys are
 * optional and carry their `default`.
 */
export function configJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(nativeConfigSchema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>
  const { $schema, ...rest } = generated
  return {
    $schema,
    title: 'Barbican configuration',
    description:
      'Configuration of the Barbican MCP gateway: where it listens, which upstream MCP servers ' +
      'it aggregates, and how they are served. See docs/configuration.md.',
    ...rest,
  }
}

/** The committed file's exact text: two-space indentation and a final newline. */
export function configJsonSchemaText(): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`
}
