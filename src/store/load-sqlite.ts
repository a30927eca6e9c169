/** `node:sqlite`, loaded once for every SQLite user in Barbican (the store, the token backend). */
let sqliteModule: Promise<typeof import('node:sqlite')> | undefined

/**
 * Loads `node:sqlite` once. Node announces it with an ExperimentalWarning on first load; that one
 * warning is dropped (operators cannot act on it), every other warning passes through.
 */
export function loadSqlite(): Promise<typeof import('node:sqlite')> {
  sqliteModule ??= (async () => {
    const emit = process.emitWarning
    process.emitWarning = function filtered(this: unknown, warning: unknown, ...rest: unknown[]) {
      const text = typeof warning === 'string' ? warning : (warning as Error | undefined)?.message
      const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string })?.type
      if (type === 'ExperimentalWarning' && /SQLite/.test(String(text))) return
      return (emit as (...args: unknown[]) => void).call(process, warning, ...rest)
    } as typeof process.emitWarning
    try {
      return await import('node:sqlite')
    } finally {
      process.emitWarning = emit
    }
  })()
  return sqliteModule
}
