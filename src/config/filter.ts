/**
 * Glob filters for the `include`/`exclude` lists of a virtual server. Kept next to the schema so
 * the matching rules the docs promise live in one place.
 */
import picomatch from 'picomatch'
import { globForJudgedUris } from '../relay/resource-uri.ts'

/**
 * Compiles include/exclude globs into a predicate. `include` absent admits every name; an empty
 * `include` admits none; a name matching any `exclude` glob is refused even when included.
 * `*` does not cross `/` (relevant for resource URIs), `**` does; dots are ordinary characters.
 *
 * @example
 * const visible = compileFilter(['read_*'], ['*secret*'])
 * visible('read_file') // true
 * visible('read_secret') // false
 */
export function compileFilter(
  include?: readonly string[],
  exclude?: readonly string[],
): (name: string) => boolean {
  const options = { dot: true }
  const included = include === undefined ? undefined : matcher(include, options)
  const excluded =
    exclude === undefined || exclude.length === 0 ? undefined : matcher(exclude, options)
  return (name) => {
    if (excluded?.(name)) return false
    return included === undefined || included(name)
  }
}

function matcher(globs: readonly string[], options: picomatch.PicomatchOptions) {
  if (globs.length === 0) return () => false
  return picomatch([...globs], options)
}

/**
 * Compiles include/exclude globs over resource URIs, judged in their normalised form
 * (relay/resource-uri.ts). `forms` are the spellings of one URI a glob may name (the upstream's
 * own and the namespaced one). Excludes match case-insensitively, so `/Private/` cannot slip
 * past an exclude of `private` directories on a server whose paths ignore case; includes stay case-sensitive, so
 * a changed case is never admitted by them either (ADR 020).
 */
export function compileUriFilter(
  include?: readonly string[],
  exclude?: readonly string[],
): (forms: readonly string[]) => boolean {
  const included =
    include === undefined ? undefined : matcher(include.map(globForJudgedUris), { dot: true })
  const excluded =
    exclude === undefined || exclude.length === 0
      ? undefined
      : matcher(exclude.map(globForJudgedUris), { dot: true, nocase: true })
  return (forms) => {
    if (excluded && forms.some((f) => excluded(f))) return false
    return included === undefined || forms.some((f) => included(f))
  }
}
