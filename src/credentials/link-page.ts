/**
 * The account-linking pages: tiny HTML, never framed (clickjacking), never cached, never leaking
 * the ticket in a Referer, every interpolated value escaped.
 */
import type { ServerResponse } from 'node:http'

/** A small page, framed by nobody, cached by nobody, leaking no ticket through Referer. */
export function page(
  res: ServerResponse,
  status: number,
  title: string,
  text: string,
  action?: { href: string; label: string },
  headers: Readonly<Record<string, string>> = {},
): void {
  const body =
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${html(title)}</title></head>` +
    `<body><h1>${html(title)}</h1><p>${html(text)}</p>` +
    (action
      ? `<p><a id="continue" href="${html(action.href)}">${html(action.label)}</a></p>`
      : '') +
    '</body></html>'
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
    ...headers,
  })
  res.end(body)
}

function html(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
