/**
 * Glob filters for the `include`/`exclude` lists of a virtual server. Kept next to the schema so
 * the matching rules the docs promise live in one place.
 */
import picomatch from 'picomatch'

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
