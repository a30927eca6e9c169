/**
 * `confirm:` and `contexts:` of the native format: which tool calls a human must confirm, and
 * the operator labels that make secure contexts (docs/policy.md, ADR 035).
 */
import { z } from 'zod'

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

const globs = z.array(z.string().min(1)).min(1)

export const confirmSchema = doc(
  z.strictObject({
    servers: doc(
      globs.optional(),
      'Virtual servers',
      'Virtual servers (globs) the rule covers. Default: all.',
    ),
    tools: doc(
      globs.optional(),
      'Tools',
      'Tools by the name clients see (globs, e.g. "*__delete_*") whose calls need confirmation.',
    ),
    destructive: doc(
      z.boolean().default(false),
      'Destructive tools',
      'Also every tool whose annotations say destructiveHint: true. Default: false.',
    ),
  }),
  'Confirmation',
  'Tool calls a human confirms before they are sent: the calling client is asked ' +
    '(elicitation/create, or input_required for 2026-07-28 clients); a client that cannot ' +
    'ask is refused. Default: none.',
)

export const CONTEXTS_DEFAULTS = Object.freeze({
  onTrifecta: 'deny' as const,
  windowMs: 3_600_000,
  maxContexts: 10_000,
})

const labelRule = z.strictObject({
  upstreams: doc(globs.optional(), 'Upstreams', 'Upstreams (names) whose tools carry the label.'),
  tools: doc(globs.optional(), 'Tools', 'Tools by the name clients see (globs).'),
})

export const contextsSchema = doc(
  z.strictObject({
    labels: doc(
      z.record(z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/), labelRule),
      'Labels',
      'Label → where it applies. private (reads private data), untrusted (returns outside ' +
        'content) and egress (can send data out) make the trifecta; other labels are tracked ' +
        'only.',
    ),
    onTrifecta: doc(
      z.enum(['deny', 'confirm']).default(CONTEXTS_DEFAULTS.onTrifecta),
      'On trifecta',
      'What happens to an egress call once private and untrusted have both entered the ' +
        'context: deny, or ask a human (as confirm: does). Default: deny.',
    ),
    windowMs: doc(
      z
        .int()
        .min(1000)
        .max(7 * 24 * 3_600_000)
        .default(CONTEXTS_DEFAULTS.windowMs),
      'Window (ms)',
      'How long a label stays in a context after it last entered. Default: 3600000 (1 hour).',
    ),
    maxContexts: doc(
      z.int().min(1).max(10_000_000).default(CONTEXTS_DEFAULTS.maxContexts),
      'Most contexts',
      'Most contexts tracked at once; beyond, labelled calls of new contexts are refused ' +
        'until older ones expire (fail closed). Default: 10000.',
    ),
  }),
  'Secure contexts',
  'Operator labels on upstreams and tools, tracked per context (a legacy session, or identity ' +
    'and client for clients without one). Default: none.',
)

export type ConfirmConfig = z.output<typeof confirmSchema>
export type ContextsConfig = z.output<typeof contextsSchema>
