/**
 * A virtual server in the native format: which upstreams it aggregates, how their names are
 * namespaced, and which tools, prompts and resources it exposes under which names.
 */
import { z } from 'zod'
import {
  CODE_DEFAULTS,
  DEFAULT_NAMES_BUDGET,
  DEFAULT_SEPARATOR,
  ITEM_NAME_PATTERN,
  SEPARATOR_PATTERN,
  TOOLS_MODES,
} from './defaults.ts'

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

const globList = (title: string, text: string) => doc(z.array(z.string().min(1)), title, text)

const include = (what: string) =>
  globList(
    'Include',
    `Only ${what} matching one of these globs are exposed. A glob matches the upstream's own ` +
      'name (read_file) or the namespaced one (files__read_file); * does not cross "/", ** does. ' +
      'Default: all.',
  ).optional()
const exclude = (what: string) =>
  globList(
    'Exclude',
    `${what} matching any of these globs are hidden; exclude wins. Default: [].`,
  ).default([])
const rename = (what: string) =>
  doc(
    z.record(z.string().min(1), z.string().regex(ITEM_NAME_PATTERN)).default({}),
    'Rename',
    `Maps a ${what} name (the upstream's own, or namespaced as files__name) to the name ` +
      'clients see. Default: {}.',
  )

/** One virtual server; every key is optional. */
export const virtualServerSchema = z.strictObject({
  upstreams: doc(
    z.array(z.string()).min(1).optional(),
    'Upstreams',
    'Names of the upstreams this virtual server aggregates, in order. Default: all upstreams.',
  ),
  namespacing: doc(
    z
      .strictObject({
        mode: doc(
          z.enum(['auto', 'always', 'on-conflict', 'never']).default('auto'),
          'Mode',
          "always: every name gets its upstream's prefix; on-conflict: only names offered by " +
            'several upstreams; never: names pass unchanged; auto: never with one upstream, ' +
            'always with several. Default: auto.',
        ),
        separator: doc(
          z.string().regex(SEPARATOR_PATTERN).default(DEFAULT_SEPARATOR),
          'Separator',
          'Joins upstream name and item name (files__read_file). Default: "__".',
        ),
      })
      .default({ mode: 'auto', separator: DEFAULT_SEPARATOR }),
    'Namespacing',
    'How tool, prompt and resource names from several upstreams are kept apart.',
  ),
  tools: doc(
    z
      .strictObject({
        include: include('tools'),
        exclude: exclude('Tools'),
        rename: rename('tool'),
        descriptions: doc(
          z.record(z.string().min(1), z.string()).default({}),
          'Descriptions',
          'Replaces the description of a tool, keyed by its exposed (renamed) name. Default: {}.',
        ),
        mode: doc(
          z.enum(TOOLS_MODES).default('all'),
          'Mode',
          'all: tools/list shows every tool; search: it shows the meta-tools search_tools and ' +
            'call_tool (plus `pinned`), and the catalogue is reached through them; code: it ' +
            'shows one `run_code` tool whose JavaScript program calls the catalogue as async ' +
            'functions in a QuickJS isolate (docs/context-economy.md). Default: all.',
        ),
        pinned: doc(
          z.array(z.string().min(1)).default([]),
          'Pinned',
          'In search mode, tools (exposed names) listed beside the meta-tools. Default: [].',
        ),
        search: doc(
          z
            .strictObject({
              namesBudget: doc(
                z.number().int().min(0).max(100_000).optional(),
                'Names budget',
                'In search mode, tokens (o200k_base) the names of the tools a caller may call ' +
                  "may take in search_tools' description, grouped by server; past it, only the " +
                  `servers and their tool counts are shown; 0: counts only. Default: ${DEFAULT_NAMES_BUDGET}.`,
              ),
            })
            .optional(),
          'Search',
          'Search mode settings (docs/context-economy.md).',
        ),
      })
      .default({ exclude: [], rename: {}, descriptions: {}, mode: 'all', pinned: [] }),
    'Tools',
    'Which tools are exposed, and under what names.',
  ),
  adapt: doc(
    z.enum(['tools-only']).optional(),
    'Adapt',
    'tools-only: also offers the tools `list_resources`, `read_resource` and `get_prompt`, ' +
      'for hosts that support only tools. Default: none.',
  ),
  code: doc(
    z
      .strictObject({
        memoryMb: doc(
          z.number().int().min(1).max(1024).default(CODE_DEFAULTS.memoryMb),
          'Memory',
          `Heap of one run_code program, in MiB. Default: ${CODE_DEFAULTS.memoryMb}.`,
        ),
        timeoutMs: doc(
          z.number().int().min(10).max(600_000).default(CODE_DEFAULTS.timeoutMs),
          'Time limit',
          'Wall-clock time of one program, its tool calls included (not the time a human takes to answer a confirmation), in milliseconds. ' +
            `Default: ${CODE_DEFAULTS.timeoutMs}.`,
        ),
        maxCalls: doc(
          z.number().int().min(0).max(10_000).default(CODE_DEFAULTS.maxCalls),
          'Tool calls',
          `Tool calls one program may make. Default: ${CODE_DEFAULTS.maxCalls}.`,
        ),
        maxOutputKb: doc(
          z.number().int().min(1).max(10_240).default(CODE_DEFAULTS.maxOutputKb),
          'Output',
          'Console output and return value kept, in KiB; more is cut and the result says so. ' +
            `Default: ${CODE_DEFAULTS.maxOutputKb}.`,
        ),
        maxConcurrent: doc(
          z.number().int().min(1).max(256).default(CODE_DEFAULTS.maxConcurrent),
          'Concurrent programs',
          'Programs of this virtual server running at once (each holds its own memory); one ' +
            `more is refused at once. Default: ${CODE_DEFAULTS.maxConcurrent}.`,
        ),
      })
      .default({ ...CODE_DEFAULTS }),
    'Code mode',
    'Limits of `tools.mode: code` programs.',
  ),
  prompts: doc(
    z
      .strictObject({
        include: include('prompts'),
        exclude: exclude('Prompts'),
        rename: rename('prompt'),
      })
      .default({ exclude: [], rename: {} }),
    'Prompts',
    'Which prompts are exposed, and under what names.',
  ),
  resources: doc(
    z
      .strictObject({ include: include('resources'), exclude: exclude('Resources') })
      .default({ exclude: [] }),
    'Resources',
    'Which resources and resource templates are exposed; globs match URIs ' +
      '(e.g. "file:///data/**").',
  ),
  tokenBudget: doc(
    z.number().int().positive().optional(),
    'Token budget',
    'Most tokens (o200k_base) the tools this server lists may cost a model, counted over each ' +
      "tool's name, description and input schema as JSON. Over it, `barbican check` and the " +
      'log warn, and the admin console shows it. Default: none.',
  ),
})
