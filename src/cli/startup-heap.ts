/**
 * The young generation during start-up. Reading the config, building its schema and compiling
 * the code allocate in one burst, after which V8 has doubled the young generation's semi-spaces
 * twice, to 4 MB that an idle gateway hardly uses. `bin/barbican.js` holds their growth factor at
 * 1 while a command starts; `endStartup()` puts V8's default (2) back once the gateway has
 * started, so that load grows the young generation exactly as before. An operator's own
 * `--semi-space-growth-factor` (on the command line or in NODE_OPTIONS) is left alone.
 */
import { setFlagsFromString } from 'node:v8'

const FLAG = '--semi-space-growth-factor'
/** V8's default growth factor. */
const DEFAULT_FACTOR = 2

/** Whether the operator set the growth factor, so Barbican must not touch it. */
export function operatorSetGrowth(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string | undefined = process.env.NODE_OPTIONS,
): boolean {
  return [...execArgv, nodeOptions ?? ''].some((arg) => arg.includes(FLAG))
}

/** Restores V8's default growth of the young generation (idempotent). */
export function endStartup(): void {
  if (!operatorSetGrowth()) setFlagsFromString(`${FLAG}=${DEFAULT_FACTOR}`)
}
