/**
 * Each virtual server's tool costs in tokens against its `tokenBudget` (ADR 051), for the admin
 * console and the gateway's log. The catalog is read as the overview reads it: a lazy member is
 * not started just to be counted.
 */

import type { Config } from '../config/config.ts'
import { overBudget, toolCosts } from '../exposure/tool-tokens.ts'
import type { Logger } from '../telemetry/log.ts'
import type { Gateway } from './gateway.ts'
import { catalogWithin, OVERVIEW_LIST_WAIT_MS } from './overview.ts'

export interface ServerCosts {
  readonly server: string
  /** Exposed name → tokens, in catalog order. */
  readonly tools: ReadonlyMap<string, number>
  readonly total: number
  readonly budget: number | undefined
  /** The warning when over budget. */
  readonly over: string | undefined
}

/** The costs of one virtual server's tools; undefined when its catalog is not at hand. */
export async function serverCosts(
  gateway: Gateway,
  config: Config,
  server: string,
  waitMs = OVERVIEW_LIST_WAIT_MS,
): Promise<ServerCosts | undefined> {
  const view = await catalogWithin(gateway, server, waitMs)
  if (!view) return undefined
  const { tools, total } = await toolCosts(view.catalog.tools)
  const budget = config.servers.find((s) => s.name === server)?.tokenBudget
  return {
    server,
    tools: new Map(tools.map((t) => [t.name, t.tokens])),
    total,
    budget,
    over: overBudget(server, total, budget),
  }
}

/**
 * Logs a warning for each virtual server with a budget that its tools exceed. Servers without
 * a budget are not counted, so a gateway with none never loads the tokenizer.
 */
export async function warnOverBudget(gateway: Gateway, config: Config, log: Logger): Promise<void> {
  for (const s of config.servers) {
    if (s.tokenBudget === undefined) continue
    const costs = await serverCosts(gateway, config, s.name)
    if (costs?.over)
      log.warn(costs.over, { server: s.name, tokens: costs.total, budget: costs.budget })
  }
}
