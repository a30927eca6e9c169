/** A URL without its password, for messages and logs (database URLs carry credentials). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password !== '') u.password = '***'
    return u.toString()
  } catch {
    return '(unparsable URL)'
  }
}
