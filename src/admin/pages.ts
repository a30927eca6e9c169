/**
 * The admin console's pages, rendered on the server as plain HTML (ADR 050): no script, no
 * framework, one stylesheet served from /admin/console.css. Changes are ordinary forms that post
 * back with the CSRF token; charts are SVG drawn here. Everything interpolated passes `text()`:
 * hidden characters become visible escapes and HTML is escaped, because names, descriptions and
 * errors are text an upstream chose.
 */
import type { AuditRecord } from '../audit/record.ts'
import type { ApiKeyEntry } from '../auth/api-keys.ts'
import { TOKEN_ENCODING } from '../exposure/tool-tokens.ts'
import type { Overview } from '../gateway/overview.ts'
import { printableName } from '../protocol/item-names.ts'
import type { ChangeReview } from '../trust/decisions.ts'
import type { FigurePoint } from './call-figures.ts'

export const CONSOLE_STYLE = `
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--accent:#0b5cad;--ok:#116329;--bad:#a40e26;--warn:#7d4e00}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:0}
a{color:var(--accent)}
a:focus,button:focus,input:focus,select:focus{outline:3px solid #f0b400;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:.5rem;background:#fff;padding:.25rem .5rem}
header{background:#0d1117;color:#fff;padding:.5rem 1.5rem;display:flex;flex-wrap:wrap;gap:1.5rem;align-items:center}
header .brand{font-weight:700;color:#fff;text-decoration:none}
nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:1rem;margin:0;padding:0}
nav a{color:#e6edf3;text-decoration:none;padding:.25rem 0}
nav a[aria-current=page]{border-bottom:2px solid #f0b400;color:#fff}
main{max-width:72rem;margin:0 auto;padding:1rem 1.5rem 3rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}
caption{text-align:left;font-weight:600;padding:.25rem 0}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#f6f8fa}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font:13px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.state-ready,.state-idle,.ok{color:var(--ok)}
.state-failed,.state-degraded,.bad{color:var(--bad)}
.state-connecting,.warn{color:var(--warn)}
.notice{border:1px solid var(--line);border-left:4px solid var(--accent);padding:.5rem 1rem;background:#f6f8fa}
.notice.bad{border-left-color:var(--bad);color:var(--fg)}
.secret{font:15px ui-monospace,monospace;background:#fff8c5;padding:.5rem;display:block;word-break:break-all}
.diff del{background:#ffebe9;text-decoration:line-through}.diff ins{background:#dafbe1;text-decoration:none}
form.inline{display:inline}
form.filters{display:flex;flex-wrap:wrap;gap:.75rem;align-items:end}
label{display:flex;flex-direction:column;font-size:.9rem;gap:.15rem}
label.check{flex-direction:row;align-items:center;gap:.4rem}
input,select{font:inherit;padding:.3rem .4rem;border:1px solid #8c959f;border-radius:4px}
button{font:inherit;padding:.3rem .8rem;border-radius:4px;border:1px solid #1f6feb;background:#0b5cad;color:#fff;cursor:pointer}
button.danger{background:#a40e26;border-color:#a40e26}
button.plain{background:#f6f8fa;color:var(--fg);border-color:#8c959f}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(20rem,1fr));gap:1rem}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:.5rem .75rem}
figcaption{font-weight:600}
svg.spark{width:100%;height:56px}
svg.spark .axis{stroke:#d0d7de}
svg.spark .calls{stroke:#0b5cad;fill:none;stroke-width:2}
svg.spark .errors{stroke:#a40e26;fill:none;stroke-width:2}
svg.spark .p95{stroke:#7d4e00;fill:none;stroke-width:2}
dl.figures{display:grid;grid-template-columns:auto 1fr;gap:0 1rem;margin:.25rem 0}
dl.figures dt{color:var(--muted)}
.muted{color:var(--muted)}
`

/** The pages, in navigation order: path and label. */
export const CONSOLE_PAGES = [
  ['/admin', 'Overview'],
  ['/admin/servers', 'Servers'],
  ['/admin/quarantine', 'Quarantine'],
  ['/admin/audit', 'Audit'],
  ['/admin/accounts', 'Linked accounts'],
  ['/admin/keys', 'API keys'],
  ['/admin/figures', 'Live figures'],
] as const

export type ConsolePath = (typeof CONSOLE_PAGES)[number][0]

export interface PageFrame {
  readonly path: ConsolePath | '/admin/login'
  readonly title: string
  /** The CSRF token every form carries; absent on the login page. */
  readonly csrf?: string | undefined
  /** Who is signed in (`loopback` on an open loopback gateway). */
  readonly actor?: string | undefined
  /** Whether a sign-out button applies (a console session exists). */
  readonly session?: boolean | undefined
  readonly notice?: { readonly text: string; readonly bad?: boolean } | undefined
}

/** Hidden characters as escapes, then HTML-escaped. */
export function text(value: unknown, width = 200): string {
  return printableName(String(value ?? ''), width).replace(
    /[&<>"']/g,
    (c) => `&#${c.charCodeAt(0)};`,
  )
}

/** The whole document around a page body. */
export function page(frame: PageFrame, body: string): string {
  const nav = frame.csrf
    ? `<nav aria-label="Console"><ul>${CONSOLE_PAGES.map(
        ([path, label]) =>
          `<li><a href="${path}"${path === frame.path ? ' aria-current="page"' : ''}>${label}</a></li>`,
      ).join('')}</ul></nav>`
    : ''
  const who = frame.actor
    ? `<p class="muted">Signed in as <strong>${text(frame.actor)}</strong>${
        frame.session
          ? ` ${form('/admin/logout', frame.csrf ?? '', '<button class="plain" type="submit">Sign out</button>', 'inline')}`
          : ''
      }</p>`
    : ''
  const notice = frame.notice
    ? `<p class="notice${frame.notice.bad ? ' bad' : ''}" role="status">${text(frame.notice.text, 2000)}</p>`
    : ''
  return (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>${text(frame.title)} · Barbican admin</title>` +
    '<link rel="stylesheet" href="/admin/console.css"></head><body>' +
    '<a class="skip" href="#main">Skip to content</a>' +
    `<header><a class="brand" href="/admin">Barbican admin</a>${nav}</header>` +
    `<main id="main"><h1>${text(frame.title)}</h1>${who}${notice}${body}</main></body></html>`
  )
}

/** A form that posts to the console with the CSRF token. */
export function form(action: string, csrf: string, inner: string, cls = ''): string {
  return (
    `<form method="post" action="${action}"${cls ? ` class="${cls}"` : ''}>` +
    `<input type="hidden" name="csrf" value="${text(csrf)}">${inner}</form>`
  )
}

const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${name}" value="${text(value, 10_000)}">`

export function loginPage(frame: PageFrame, reason?: string): string {
  return page(
    frame,
    `${reason ? `<p class="notice bad" role="alert">${text(reason)}</p>` : ''}` +
      '<p>This gateway requires authentication. Sign in with an API key or token that carries ' +
      'the scope <code>barbican:admin</code>. It is kept only in this gateway&#39;s memory for ' +
      'the session and checked again on every request.</p>' +
      '<form method="post" action="/admin/login">' +
      '<label>Admin API key or token <input type="password" name="credential" autocomplete="off" required></label>' +
      '<p><button type="submit">Sign in</button></p></form>',
  )
}

/** A sandbox line; one that runs unconfined by `sandbox.fallback`, or is refused, stands out. */
function sandboxCell(line: string | undefined): string {
  if (line === undefined) return text('—')
  const bad = /^(unconfined|refused)\b/.test(line)
  return bad ? `<span class="bad">${text(line, 300)}</span>` : text(line, 300)
}

export function overviewPage(
  frame: PageFrame,
  o: Overview,
  sandboxes: ReadonlyMap<string, string>,
): string {
  const upstreams = o.upstreams.length
    ? table(
        'Upstreams',
        ['Upstream', 'State', 'MCP revision', 'Transport', 'Sandbox', 'Restarts', 'Last error'],
        o.upstreams.map((u) => [
          text(u.name),
          `<span class="state-${text(u.state)}">${text(u.state)}</span>`,
          text(u.protocolVersion ?? '—'),
          text(u.transport),
          sandboxCell(sandboxes.get(u.name)),
          num(u.restarts),
          [
            u.lastError ? `<span class="mono bad">${text(u.lastError, 600)}</span>` : '',
            ...(u.heldLists ?? []).map(
              (h) =>
                `<span class="mono bad">held back ${text(h.list)}: ${text(h.reason, 300)}</span>`,
            ),
          ]
            .filter((part) => part !== '')
            .join('<br>'),
        ]),
      )
    : '<p>No upstream is configured.</p>'
  const servers = table(
    'Virtual servers',
    ['Server', 'Path', 'Upstreams', 'Tools', 'Prompts', 'Resources', 'Quarantined'],
    o.servers.map((s) => [
      `<a href="/admin/servers#server-${text(s.name)}">${text(s.name)}</a>`,
      `<code>${text(s.path)}</code>`,
      text(s.upstreams.join(', ')),
      s.counts ? num(s.counts.tools) : '—',
      s.counts ? num(s.counts.prompts) : '—',
      s.counts ? num(s.counts.resources) : '—',
      s.counts ? num(s.counts.quarantined) : '—',
    ]),
  )
  const reload = o.lastReload
    ? `<p>Last reload: ${text(o.lastReload.at)} (${text(o.lastReload.trigger)}), ${
        o.lastReload.ok
          ? '<span class="ok">applied</span>'
          : `<span class="bad">refused: ${text(o.lastReload.error ?? '', 600)}</span>`
      }</p>`
    : '<p>No reload since start.</p>'
  return page(
    frame,
    `<p>Barbican ${text(o.version)}, config: <code>${text(o.config, 300)}</code>; ` +
      `${num(o.sessions)} client session(s).</p>${upstreams}${servers}<h2>Configuration</h2>${reload}` +
      form(
        '/admin/reload',
        frame.csrf ?? '',
        '<button type="submit">Reload the config file</button>',
      ),
  )
}

export interface ServerToolRow {
  readonly name: string
  readonly upstream: string
  readonly original: string
  readonly pin: 'pinned' | 'quarantined' | 'pending' | 'unpinned'
  readonly tokens: number | undefined
}

export interface ServerPageEntry {
  readonly name: string
  readonly path: string
  readonly tools: readonly ServerToolRow[] | undefined
  readonly total: number | undefined
  readonly budget: number | undefined
  readonly over: string | undefined
}

export function serversPage(frame: PageFrame, servers: readonly ServerPageEntry[]): string {
  const sections = servers.map((s) => {
    const head = `<h2 id="server-${text(s.name)}">${text(s.name)} <code>${text(s.path)}</code></h2>`
    if (s.tools === undefined) {
      return `${head}<p class="muted">The catalog is not at hand (a member is idle or slow to list).</p>`
    }
    const budget =
      s.total === undefined
        ? ''
        : `<p>${num(s.tools.filter((t) => t.tokens !== undefined).length)} listed tool(s) cost <strong>${num(s.total)}</strong> tokens (${TOKEN_ENCODING})${
            s.budget === undefined ? '; no budget set' : ` of a budget of ${num(s.budget)}`
          }.${s.over ? ` <strong class="bad">Over budget.</strong>` : ''}</p>`
    return (
      head +
      budget +
      table(
        `Tools of ${text(s.name)}`,
        ['Exposed name', 'Origin', 'Pin state', 'Tokens'],
        s.tools.map((t) => [
          `<code>${text(t.name)}</code>`,
          `${text(t.upstream)}: <code>${text(t.original)}</code>`,
          `<span class="${t.pin === 'quarantined' ? 'bad' : t.pin === 'pinned' ? 'ok' : 'warn'}">${t.pin}</span>`,
          t.tokens === undefined ? '—' : num(t.tokens),
        ]),
        [false, false, false, true],
      )
    )
  })
  return page(frame, sections.join('') || '<p>No virtual server.</p>')
}

export function quarantinePage(frame: PageFrame, reviews: readonly ChangeReview[]): string {
  if (reviews.length === 0) return page(frame, '<p>Nothing is quarantined or waiting.</p>')
  const items = reviews.map(({ change, changes }, i) => {
    const id = `change-${i}`
    const rows = changes.map(
      (c) =>
        `<tr><th scope="row"><code>${text(c.path)}</code></th>` +
        `<td class="diff">${c.before === undefined ? '<span class="muted">(absent)</span>' : `<del>${text(c.before, 4000)}</del>`}</td>` +
        `<td class="diff">${c.after === undefined ? '<span class="muted">(absent)</span>' : `<ins>${text(c.after, 4000)}</ins>`}</td></tr>`,
    )
    const fields = hidden('upstream', change.upstream) + hidden('key', change.key)
    const decided =
      change.status === 'rejected'
        ? `<p class="bad">Rejected by ${text(change.decidedBy ?? 'an operator')} at ${text(change.decidedAt ?? '')}; it stays hidden while the server offers it.</p>`
        : ''
    return (
      `<section aria-labelledby="${id}"><h2 id="${id}">${text(change.upstream)}: <code>${text(change.key)}</code></h2>` +
      `<p>${text(change.reason)} · ${text(change.status)} · seen ${text(change.seenAt)}</p>${decided}` +
      `<table><caption>Field changes of ${text(change.key)}</caption><tr><th scope="col">Field</th><th scope="col">Approved</th><th scope="col">Offered now</th></tr>${rows.join('')}</table>` +
      form(
        '/admin/quarantine/approve',
        frame.csrf ?? '',
        `${fields}<button type="submit" aria-label="Approve ${text(change.key)} of ${text(change.upstream)}">Approve</button>`,
        'inline',
      ) +
      (change.status === 'rejected'
        ? ''
        : ` ${form(
            '/admin/quarantine/reject',
            frame.csrf ?? '',
            `${fields}<button class="danger" type="submit" aria-label="Reject ${text(change.key)} of ${text(change.upstream)}">Reject</button>`,
            'inline',
          )}`) +
      '</section>'
    )
  })
  return page(frame, items.join(''))
}

export interface AuditFilter {
  readonly subject?: string | undefined
  readonly target?: string | undefined
  readonly outcome?: string | undefined
  readonly since?: string | undefined
  readonly until?: string | undefined
}

export function auditPage(
  frame: PageFrame,
  filter: AuditFilter,
  records: readonly AuditRecord[] | undefined,
  limit: number,
): string {
  const field = (name: keyof AuditFilter, label: string, type = 'text') =>
    `<label>${label} <input type="${type}" name="${name}" value="${text(filter[name] ?? '')}"></label>`
  const outcome = `<label>Outcome <select name="outcome">${['', 'ok', 'error', 'denied']
    .map(
      (o) =>
        `<option value="${o}"${filter.outcome === o ? ' selected' : ''}>${o || 'any'}</option>`,
    )
    .join('')}</select></label>`
  const search =
    '<form method="get" action="/admin/audit" class="filters" role="search">' +
    field('subject', 'Subject') +
    field('target', 'Target (tool, URI, pin key)') +
    outcome +
    field('since', 'Since (ISO 8601)') +
    field('until', 'Until (ISO 8601)') +
    '<button type="submit">Search</button></form>'
  if (records === undefined) {
    return page(frame, '<p>The audit log is off (<code>audit.enabled: false</code>).</p>')
  }
  const rows = records.map((r) => {
    const e = JSON.parse(r.body) as Record<string, unknown>
    const what =
      e.type === 'call'
        ? `${text(e.method)} ${text(e.target ?? '')} on ${text(e.server)}${e.upstream ? `/${text(e.upstream)}` : ''}`
        : `${text(e.action)} ${text(e.target ?? '')}${e.detail ? ` <span class="muted">${text(e.detail, 300)}</span>` : ''}`
    return [
      num(r.seq),
      `<span class="mono">${text(r.at)}</span>`,
      text(e.type),
      text(e.type === 'call' ? e.subject : e.actor),
      what,
      `<span class="${e.outcome === 'ok' ? 'ok' : 'bad'}">${text(e.outcome)}</span>`,
    ]
  })
  return page(
    frame,
    search +
      (rows.length
        ? table(
            `Matching records, newest first (at most ${limit})`,
            ['Seq', 'At', 'Type', 'Subject / actor', 'What', 'Outcome'],
            rows,
          )
        : '<p>No record matches.</p>'),
  )
}

export interface LinkedAccount {
  readonly user: string
  readonly upstream: string
  readonly issuer: string
}

export function accountsPage(
  frame: PageFrame,
  accounts: readonly LinkedAccount[] | undefined,
): string {
  if (accounts === undefined) {
    return page(
      frame,
      '<p>No upstream uses <code>credentials.mode: oauth</code>, so no user has linked an account.</p>',
    )
  }
  if (accounts.length === 0) return page(frame, '<p>No user has linked an account yet.</p>')
  return page(
    frame,
    table(
      'Linked accounts',
      ['User', 'Upstream', 'Issuer', ''],
      accounts.map((a) => [
        text(a.user),
        text(a.upstream),
        `<code>${text(a.issuer)}</code>`,
        form(
          '/admin/accounts/revoke',
          frame.csrf ?? '',
          hidden('user', a.user) +
            hidden('upstream', a.upstream) +
            hidden('issuer', a.issuer) +
            `<button class="danger" type="submit" aria-label="Revoke the link of ${text(a.user)} to ${text(a.upstream)}">Revoke</button>`,
          'inline',
        ),
      ]),
    ),
  )
}

export interface KeyRow extends ApiKeyEntry {
  /**
   * Where the key lives: the keys file or PostgreSQL (editable, the latter fleet-wide), the
   * configuration (read only), or this process's memory.
   */
  readonly origin: 'file' | 'config' | 'console' | 'postgres'
  readonly createdAt?: string | undefined
}

export function keysPage(
  frame: PageFrame,
  keys: readonly KeyRow[] | undefined,
  created?: { readonly id: string; readonly key: string },
): string {
  if (keys === undefined) {
    return page(
      frame,
      '<p>API keys need inbound authentication: add <code>auth.apiKeys.file</code> to the configuration.</p>',
    )
  }
  const secret = created
    ? `<div class="notice" role="alert"><p>Key <strong>${text(created.id)}</strong> was created. ` +
      'Copy it now: it is shown once, and Barbican keeps only its hash.</p>' +
      `<label>Secret <input class="secret" readonly value="${text(created.key, 200)}"></label></div>`
    : ''
  const list = keys.length
    ? table(
        'API keys',
        ['ID', 'Subject', 'Scopes', 'Where', 'Created', ''],
        keys.map((k) => [
          `<code>${text(k.id)}</code>`,
          text(k.subject),
          text((k.scopes ?? []).join(' ') || '—'),
          k.origin === 'config'
            ? 'configuration (read only)'
            : k.origin === 'file'
              ? 'keys file'
              : k.origin === 'postgres'
                ? 'PostgreSQL (every replica)'
                : 'memory',
          text(k.createdAt ?? '—'),
          k.origin === 'config'
            ? '<span class="muted">edit the configuration</span>'
            : form(
                '/admin/keys/revoke',
                frame.csrf ?? '',
                `${hidden('id', k.id)}<button class="danger" type="submit" aria-label="Revoke key ${text(k.id)}">Revoke</button>`,
                'inline',
              ),
        ]),
      )
    : '<p>No API key yet.</p>'
  const create = form(
    '/admin/keys/create',
    frame.csrf ?? '',
    '<h2>Create a key</h2><div class="filters">' +
      '<label>ID <input name="id" required pattern="[A-Za-z0-9][A-Za-z0-9._\\-]{0,63}" autocomplete="off"></label>' +
      '<label>Subject <input name="subject" autocomplete="off"></label>' +
      '<label>Scopes (space-separated) <input name="scopes" autocomplete="off"></label>' +
      '<button type="submit">Create</button></div>',
  )
  return page(frame, secret + list + create)
}

export function figuresPage(
  frame: PageFrame,
  enabled: boolean,
  series: ReadonlyMap<string, readonly FigurePoint[]>,
  intervalMs: number,
): string {
  if (!enabled) {
    return page(
      frame,
      '<p>Metrics are off (<code>metrics.enabled: false</code>); live figures are read from them.</p>',
    )
  }
  const charts = [...series].map(([upstream, points]) => {
    const last = points.at(-1)
    const id = `fig-${text(upstream)}`
    return (
      `<figure aria-labelledby="${id}"><figcaption id="${id}">${text(upstream)}</figcaption>` +
      '<dl class="figures">' +
      `<dt>calls/s</dt><dd>${last ? last.callsPerSecond.toFixed(2) : '0'}</dd>` +
      `<dt>errors</dt><dd>${last ? num(last.errors) : '0'}</dd>` +
      `<dt>p95</dt><dd>${last?.p95Ms === undefined ? '—' : `≤ ${fmtMs(last.p95Ms)}`}</dd></dl>` +
      spark(`Calls per second of ${upstream}`, points, (p) => p.callsPerSecond, 'calls') +
      spark(`Errors of ${upstream}`, points, (p) => p.errors, 'errors') +
      spark(`p95 latency of ${upstream} in ms`, points, (p) => p.p95Ms ?? 0, 'p95') +
      '</figure>'
    )
  })
  return page(
    frame,
    `<p>Per upstream, sampled every ${intervalMs / 1000} s over the last ${(
      (intervalMs * 60) / 60_000
    ).toFixed(
      0,
    )} min. Reload the page for new figures. Lines: blue calls/s, red errors, brown p95.</p>` +
      (charts.length
        ? `<div class="charts">${charts.join('')}</div>`
        : '<p>No call yet: figures appear after the first calls, one interval later.</p>'),
  )
}

/** A labelled sparkline: the points scaled into a 200×40 box. */
function spark(
  label: string,
  points: readonly FigurePoint[],
  value: (p: FigurePoint) => number,
  cls: string,
): string {
  const w = 200
  const h = 40
  const values = points.map(value)
  const max = Math.max(...values, 1e-9)
  const step = values.length > 1 ? w / (values.length - 1) : w
  const coords = values
    .map((v, i) => `${(i * step).toFixed(1)},${(h - (v / max) * (h - 2) - 1).toFixed(1)}`)
    .join(' ')
  return (
    `<svg class="spark" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img"><title>${text(label)}: latest ${
      values.length ? text(values.at(-1)!.toFixed(2)) : 'none'
    }, highest ${text(max.toFixed(2))}</title>` +
    `<line class="axis" x1="0" y1="${h - 0.5}" x2="${w}" y2="${h - 0.5}"></line>` +
    (values.length > 1 ? `<polyline class="${cls}" points="${coords}"></polyline>` : '') +
    '</svg>'
  )
}

function fmtMs(ms: number): string {
  return ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`
}

function num(n: number): string {
  return n.toLocaleString('en-US')
}

/** A table with a caption and column headers; `numeric` right-aligns columns. */
function table(
  caption: string,
  heads: readonly string[],
  rows: readonly (readonly string[])[],
  numeric: readonly boolean[] = [],
): string {
  const th = heads
    .map(
      (h, i) =>
        `<th scope="col"${numeric[i] ? ' class="num"' : ''}>${h || '<span class="skip">Actions</span>'}</th>`,
    )
    .join('')
  const body = rows
    .map(
      (r) =>
        `<tr>${r.map((c, i) => `<td${numeric[i] ? ' class="num"' : ''}>${c}</td>`).join('')}</tr>`,
    )
    .join('')
  return `<table><caption>${caption}</caption><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table>`
}
