/**
 * `barbican policy explain --as SUBJECT --call TOOL [--args JSON]`: asks the configured Cedar
 * policies whether SUBJECT may call TOOL, offline, and prints the decision and the policies that
 * decided it (docs/policy.md). The tool's upstream is read from its namespaced name; its
 * annotations are not known offline, so policies on them decide as for a tool without any.
 */
import type { Identity } from '../auth/identity.ts'
import type { LoadedConfig } from '../config/config.ts'
import { judgePermission } from '../policies/authorize.ts'
import { CedarEngine, readPolicyFiles, validatePolicies } from '../policies/cedar-engine.ts'
import { SecureContexts } from '../policies/secure-contexts.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'

export interface ExplainOptions {
  readonly call?: string | undefined
  readonly args?: string | undefined
}

export async function runPolicy(
  options: CommandOptions,
  explain: ExplainOptions,
  positionals: readonly string[],
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, false),
): Promise<number> {
  if (positionals[0] !== 'explain' || positionals.length > 1) {
    io.stderr('barbican: usage: barbican policy explain --as SUBJECT --call TOOL [--args JSON]\n')
    return 2
  }
  if (options.actor === undefined || explain.call === undefined) {
    io.stderr('barbican: policy explain needs --as SUBJECT and --call TOOL\n')
    return 2
  }
  let args: JsonObject | undefined
  if (explain.args !== undefined) {
    try {
      const parsed = JSON.parse(explain.args) as unknown
      if (!isPlainObject(parsed)) throw new Error('not a JSON object')
      args = parsed
    } catch (err) {
      io.stderr(`barbican: --args must be a JSON object: ${(err as Error).message}\n`)
      return 2
    }
  }
  const loaded = await loading
  if (!loaded) return 1
  const { config } = loaded
  const permissions = config.auth?.permissions
  if (!config.cedar && !permissions) {
    io.stderr('barbican: no policies are configured (cedar.policies, auth.permissions)\n')
    return 1
  }
  const serverName = options.server ?? config.servers[0]!.name
  const server = config.servers.find((s) => s.name === serverName)
  if (server === undefined) {
    io.stderr(`barbican: no virtual server "${serverName}"\n`)
    return 2
  }
  let engine: CedarEngine | undefined
  try {
    if (config.cedar) {
      const policies = readPolicyFiles(config.cedar.policies)
      const errors = validatePolicies(policies)
      if (errors.length > 0) throw new Error(errors.join('; '))
      engine = new CedarEngine(policies)
    }
  } catch (err) {
    io.stderr(`barbican: the Cedar policies are invalid: ${(err as Error).message}\n`)
    return 1
  }
  const tool = explain.call
  const sep = server.namespacing.separator
  const upstream = server.upstreams.find((u) => tool.startsWith(`${u}${sep}`))
  const identity: Identity = {
    subject: options.actor,
    tenant: options.tenant,
    scopes: options.scopes ?? [],
    method: 'config',
  }
  // Labels come from the configuration; pin state needs the live store, so offline it is unknown.
  const contexts = config.contexts ? new SecureContexts(config.contexts) : undefined
  const labels =
    contexts && upstream !== undefined ? [...contexts.labelsOf(upstream, tool)].sort() : []
  const upstreamLabels =
    contexts && upstream !== undefined ? [...contexts.upstreamLabels(upstream)].sort() : []
  io.stdout(
    `request:  ${options.actor} call "${tool}" on server "${server.name}"${upstream ? ` (upstream "${upstream}")` : ''}\n`,
  )
  // auth.permissions are judged first, as the chain does (authorize, then cedar): both must allow.
  const permitted = permissions
    ? judgePermission(permissions, identity, server.name, { kind: 'tool', name: tool })
    : undefined
  if (permitted) {
    io.stdout(
      permitted.allowed
        ? `permissions: ALLOW by ${permitted.rule}\n`
        : 'permissions: DENY (no rule of auth.permissions grants this tool to this caller)\n',
    )
  }
  if (engine === undefined) {
    const allowed = permitted?.allowed === true
    io.stdout(`decision: ${allowed ? 'ALLOW' : 'DENY'}\n`)
    return allowed ? 0 : 3
  }
  const decision = engine.decide({
    identity,
    server: server.name,
    action: 'call',
    target: { kind: 'tool', name: tool, upstream, labels, upstreamLabels },
    transport: 'streamable-http',
    method: 'tools/call',
    arguments: args,
  })
  const texts = new Map(engine.policies.map((p) => [p.id, p.text]))
  const allowed = decision.allowed && permitted?.allowed !== false
  io.stdout(`cedar: ${decision.allowed ? 'ALLOW' : 'DENY'}\n`)
  if (decision.reasons.length === 0) {
    io.stdout(
      decision.allowed
        ? 'decided by: no policy\n'
        : 'decided by: no policy permits this request (Cedar denies by default)\n',
    )
  } else {
    io.stdout('decided by:\n')
    for (const id of decision.reasons) {
      io.stdout(`  ${id}\n${indent(texts.get(id) ?? '')}\n`)
    }
  }
  for (const e of decision.errors) io.stdout(`error:    ${e}\n`)
  io.stdout(`decision: ${allowed ? 'ALLOW' : 'DENY'}\n`)
  // The exit code is the decision, so scripts can test policies: 0 allow, 3 deny.
  return allowed ? 0 : 3
}

function indent(text: string): string {
  return text
    .trim()
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n')
}
