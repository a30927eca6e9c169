/**
 * Checks the imports between the modules of src/ against a table of layers: each module belongs
 * to one layer (by where it lives) and may import modules of its own layer and of the layers
 * below it. Imports are read with TypeScript's own pre-processor, so `import type`, `export …
 * from` and `import()` all count: a type-only import still ties one layer to another.
 */
import { posix } from 'node:path'
import ts from 'typescript'

export interface LayerRules {
  /** Layer names from the bottom up. */
  readonly layers: readonly string[]
  /**
   * Where each layer lives: a path under src/, either a folder (ending in `/`) or one file,
   * mapped to its layer. The longest matching entry wins.
   */
  readonly places: Readonly<Record<string, string>>
  /** Upward imports tolerated for now, one module to another, each with why. */
  readonly exceptions: readonly {
    readonly from: string
    readonly to: string
    readonly why: string
  }[]
}

export interface LayerReport {
  /** One line per import that breaks the rules, and per module that belongs to no layer. */
  readonly violations: readonly string[]
  /** Exceptions no import needs any more: remove them so the list only shrinks. */
  readonly unusedExceptions: readonly string[]
}

/** Relative module specifiers imported by `source`, in any form. */
export function importsOf(source: string): string[] {
  const info = ts.preProcessFile(source, true, true)
  return info.importedFiles.map((f) => f.fileName).filter((name) => name.startsWith('.'))
}

/** The layer of `path` (relative to src/, with `/`), or undefined when no place names it. */
export function layerOf(path: string, rules: LayerRules): string | undefined {
  let best: string | undefined
  for (const place of Object.keys(rules.places)) {
    const matches = place.endsWith('/') ? path.startsWith(place) : path === place
    if (matches && (best === undefined || place.length > best.length)) best = place
  }
  return best === undefined ? undefined : rules.places[best]
}

/** Checks every module of `modules` (path relative to src/ → source text). */
export function checkLayers(modules: ReadonlyMap<string, string>, rules: LayerRules): LayerReport {
  const rank = new Map(rules.layers.map((layer, index) => [layer, index]))
  for (const layer of Object.values(rules.places)) {
    if (!rank.has(layer)) throw new Error(`place maps to unknown layer "${layer}"`)
  }
  const violations: string[] = []
  const used = new Set<string>()
  for (const [path, source] of modules) {
    const layer = layerOf(path, rules)
    if (layer === undefined) {
      violations.push(`${path} belongs to no layer: add its folder or file to the places`)
      continue
    }
    for (const specifier of importsOf(source)) {
      const target = posix.normalize(posix.join(posix.dirname(path), specifier))
      if (target.startsWith('../')) continue // outside src/, e.g. package.json
      const targetLayer = layerOf(target, rules)
      if (targetLayer === undefined) {
        violations.push(`${path} imports ${target}, which belongs to no layer`)
        continue
      }
      if (rank.get(targetLayer)! <= rank.get(layer)!) continue
      const exception = rules.exceptions.find((e) => e.from === path && e.to === target)
      if (exception !== undefined) {
        used.add(`${exception.from} → ${exception.to}`)
        continue
      }
      violations.push(`${path} (${layer}) imports ${target} (${targetLayer}), a layer above it`)
    }
  }
  const unusedExceptions = rules.exceptions
    .map((e) => `${e.from} → ${e.to}`)
    .filter((edge) => !used.has(edge))
  return { violations, unusedExceptions }
}
