/**
 * The admin console at /admin (ADR 050, docs/admin.md): server-rendered pages over what the
 * admin API and the CLI already use (the overview, pin decisions, the audit store, API keys,
 * linked accounts, the call histogram).
 *
 * Access is the admin API's: open on a loopback bind with no inbound auth; otherwise an identity
 * with `barbican:admin`, presented as a bearer header or, for a browser, once on the sign-in
 * form. The credential is then kept in this process's memory behind a random session cookie and
 * checked again on every request, so revoking it ends the console session too.
 *
 * Defences: every change is a POST carrying a CSRF token (an HMAC of the session under a
 * per-process key) and, from a browser, an Origin equal to the gateway's own; the CSP allows
 * only the console's own stylesheet and no script; frames are refused (frame-ancestors 'none',
 * X-Frame-Options); Host and Origin are checked before routing, as on every route. Every change
 * is audited and acts on the next request (pin decisions refresh the catalogs at once).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { AuditLog } from '../audit/audit-log.ts'
import type { AdminEvent } from '../audit/record.ts'
import { ADMIN_SCOPE, isAdmin } from '../auth/admin.ts'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import type { Overview } from '../gateway/overview.ts'
import type { PinStore } from '../store/store.ts'
import { approveChange, rejectChange, reviewChanges } from '../trust/decisions.ts'
import type { AdminAccess } from './api.ts'
import type { CallFigures } from './call-figures.ts'
import {
  accountsPage,
  auditPage,
  CONSOLE_STYLE,
  type ConsolePath,
  figuresPage,
  type KeyRow,
  keysPage,
  type LinkedAccount,
  loginPage,
  overviewPage,
  type PageFrame,
  quarantinePage,
  type ServerPageEntry,
  serversPage,
} from './pages.ts'

/** What the console reads and changes; each part absent when the gateway lacks it. */
export interface ConsoleSource {
  overview(): Promise<Overview>
  /** Sandbox mechanism per stdio upstream, as `check` and the log name it. */
  sandboxes(): ReadonlyMap<string, string>
  servers(): Promise<readonly ServerPageEntry[]>
  readonly pins: PinStore
  /** Called after a pin decision so catalogs follow it at the next request. */
  refreshTrust(): Promise<void>
  readonly audit: AuditLog | undefined
  readonly keys: ConsoleKeys | undefined
  readonly accounts: ConsoleAccounts | undefined
  readonly figures: CallFigures
  reload(actor: string): Promise<{ readonly ok: boolean; readonly error?: string | undefined }>
}

export interface ConsoleKeys {
  list(): Promise<readonly KeyRow[]>
  /** Creates a key and returns its secret (shown once). */
  create(entry: {
    readonly id: string
    readonly subject: string
    readonly scopes: readonly string[]
  }): Promise<string>
  /** Revokes a key; false when there is none by that id, throws for a configured one. */
  revoke(id: string): Promise<boolean>
}

export interface ConsoleAccounts {
  /** Undefined when no upstream uses `credentials.mode: oauth` (or its store cannot list). */
  list(): Promise<readonly LinkedAccount[] | undefined>
  revoke(account: LinkedAccount): Promise<void>
}

/** How long a console session lives without a request. */
export const CONSOLE_IDLE_MS = 30 * 60_000
/** Most console sessions at once (oldest dropped first). */
export const CONSOLE_MAX_SESSIONS = 64
/** Largest form body accepted. */
export const CONSOLE_MAX_FORM_BYTES = 16 * 1024
/** Newest audit records a search shows. */
export const CONSOLE_AUDIT_LIMIT = 200

export const CONSOLE_CSP =
  "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

const COOKIE = 'barbican_console'
const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

interface ConsoleSession {
  readonly credential: string
  lastSeen: number
}

/** Who asked: a checked admin identity (and its session, for a browser) or the open loopback. */
interface Caller {
  readonly actor: string
  /** What the CSRF token is bound to. */
  readonly binding: string
  readonly session: string | undefined
}

type Route = (req: IncomingMessage, res: ServerResponse) => Promise<void>

export function consoleRoutes(access: AdminAccess, source: ConsoleSource): Map<string, Route> {
  const gate = consoleGate(access, source)
  return new Map([...signInRoutes(gate), ...pageRoutes(gate), ...changeRoutes(gate)])
}

/** The style sheet, signing in and out. */
function signInRoutes({ access, source, sessions, change }: Gate): Map<string, Route> {
  const routes = new Map<string, Route>()
  routes.set('/admin/console.css', async (req, res) => {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/css; charset=utf-8',
      'cache-control': 'no-cache',
    })
    res.end(req.method === 'HEAD' ? undefined : CONSOLE_STYLE)
  })
  routes.set('/admin/login', async (req, res) => {
    if (access.authenticator === undefined) return redirect(res, '/admin')
    if (req.method === 'GET' || req.method === 'HEAD') {
      return sendPage(res, 200, loginPage(frameOf('/admin/login', 'Sign in')), req.method)
    }
    if (req.method !== 'POST') return sendText(res, 405, 'Use GET or POST', { allow: 'GET, POST' })
    const refusal = sameOrigin(req.headers)
    if (refusal) return sendText(res, 403, refusal)
    const form = await readForm(req)
    if (typeof form === 'string') return sendText(res, 400, form)
    const credential = (form.get('credential') ?? '').trim()
    const identity = await adminIdentity(access, { authorization: `Bearer ${credential}` })
    if (typeof identity === 'string') {
      return sendPage(res, 401, loginPage(frameOf('/admin/login', 'Sign in'), identity))
    }
    if (sessions.size >= CONSOLE_MAX_SESSIONS) sessions.delete(sessions.keys().next().value!)
    const sid = randomBytes(32).toString('base64url')
    sessions.set(sid, { credential, lastSeen: Date.now() })
    await source.audit?.record({
      type: 'admin',
      action: 'console.signin',
      actor: identity.subject,
      outcome: 'ok',
    })
    const secure = (req.socket as { encrypted?: boolean }).encrypted ? '; Secure' : ''
    res.setHeader('set-cookie', `${COOKIE}=${sid}; Path=/admin; HttpOnly; SameSite=Strict${secure}`)
    redirect(res, '/admin')
  })
  routes.set(
    '/admin/logout',
    change(async (_form, caller, res) => {
      if (caller.session) sessions.delete(caller.session)
      res.setHeader('set-cookie', `${COOKIE}=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0`)
      redirect(res, '/admin/login')
      return undefined
    }),
  )

  return routes
}

/** The pages. */
function pageRoutes({ source, view }: Gate): Map<string, Route> {
  const routes = new Map<string, Route>()
  routes.set(
    '/admin',
    view('/admin', 'Overview', async (f) =>
      overviewPage(f, await source.overview(), source.sandboxes()),
    ),
  )
  routes.set(
    '/admin/servers',
    view('/admin/servers', 'Virtual servers and catalogs', async (f) =>
      serversPage(f, await source.servers()),
    ),
  )
  routes.set(
    '/admin/quarantine',
    view('/admin/quarantine', 'Quarantine', async (f) =>
      quarantinePage(f, await reviewChanges(source.pins)),
    ),
  )
  routes.set(
    '/admin/audit',
    view('/admin/audit', 'Audit log', async (f, url) => {
      const q = url.searchParams
      const pick = (k: string) => {
        const v = q.get(k)?.trim()
        return v ? v.slice(0, 500) : undefined
      }
      const filter = {
        subject: pick('subject'),
        target: pick('target'),
        outcome: pick('outcome'),
        since: pick('since'),
        until: pick('until'),
      }
      const records = source.audit
        ? await source.audit.store.read({
            ...filter,
            newestFirst: true,
            limit: CONSOLE_AUDIT_LIMIT,
          })
        : undefined
      return auditPage(f, filter, records, CONSOLE_AUDIT_LIMIT)
    }),
  )
  routes.set(
    '/admin/accounts',
    view('/admin/accounts', 'Linked accounts', async (f) =>
      accountsPage(f, source.accounts ? await source.accounts.list() : undefined),
    ),
  )
  routes.set(
    '/admin/keys',
    view('/admin/keys', 'API keys', async (f) => keysPage(f, await source.keys?.list())),
  )
  routes.set(
    '/admin/figures',
    view('/admin/figures', 'Live figures', async (f) => {
      source.figures.start()
      return figuresPage(f, source.figures.enabled, source.figures.series(), 5_000)
    }),
  )

  return routes
}

/** The changes an operator makes. */
function changeRoutes({ source, frameFor, change }: Gate): Map<string, Route> {
  const routes = new Map<string, Route>()
  routes.set(
    '/admin/quarantine/approve',
    change(async (form, caller, res) => {
      const { upstream, key } = pinOf(form)
      await approveChange(source.pins, upstream, key, `console (${caller.actor})`)
      await source.refreshTrust()
      redirect(res, '/admin/quarantine?done=approved')
      return { audit: { action: 'pin.approve', upstream, target: key } }
    }),
  )
  routes.set(
    '/admin/quarantine/reject',
    change(async (form, caller, res) => {
      const { upstream, key } = pinOf(form)
      await rejectChange(source.pins, upstream, key, `console (${caller.actor})`)
      await source.refreshTrust()
      redirect(res, '/admin/quarantine?done=rejected')
      return { audit: { action: 'pin.reject', upstream, target: key } }
    }),
  )
  routes.set(
    '/admin/keys/create',
    change(async (form, caller, res) => {
      const keys = needKeys(source.keys)
      const id = (form.get('id') ?? '').trim()
      if (!KEY_ID.test(id)) {
        throw new BarbicanError(
          'ERR_INVALID_PARAMS',
          'A key ID is 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit',
        )
      }
      const subject = (form.get('subject') ?? '').trim().slice(0, 256) || id
      const scopes = (form.get('scopes') ?? '').split(/\s+/).filter(Boolean).slice(0, 32)
      const secret = await keys.create({ id, subject, scopes })
      const frame = frameFor(caller, '/admin/keys', 'API keys')
      sendPage(res, 200, keysPage(frame, await keys.list(), { id, key: secret }))
      return {
        audit: {
          action: 'key.create',
          target: id,
          detail: `subject ${subject}${scopes.length ? `, scopes ${scopes.join(' ')}` : ''}`,
        },
      }
    }),
  )
  routes.set(
    '/admin/keys/revoke',
    change(async (form, _caller, res) => {
      const id = form.get('id') ?? ''
      if (!(await needKeys(source.keys).revoke(id))) {
        throw new BarbicanError('ERR_INVALID_PARAMS', `No API key "${id.slice(0, 64)}"`)
      }
      redirect(res, '/admin/keys?done=revoked')
      return { audit: { action: 'key.revoke', target: id } }
    }),
  )
  routes.set(
    '/admin/accounts/revoke',
    change(async (form, _caller, res) => {
      if (!source.accounts) throw new BarbicanError('ERR_INVALID_PARAMS', 'No linked accounts')
      const account = {
        user: form.get('user') ?? '',
        upstream: form.get('upstream') ?? '',
        issuer: form.get('issuer') ?? '',
      }
      await source.accounts.revoke(account)
      redirect(res, '/admin/accounts?done=unlinked')
      return {
        audit: {
          action: 'account.unlink',
          upstream: account.upstream,
          target: account.user,
          detail: account.issuer,
        },
      }
    }),
  )
  routes.set(
    '/admin/reload',
    change(async (_form, caller, res) => {
      const result = await source.reload(`console (${caller.actor})`)
      redirect(res, `/admin?done=${result.ok ? 'reloaded' : 'reload-refused'}`)
      // The reloader audits the reload itself (config.reload), with what it applied.
      return undefined
    }),
  )
  return routes
}

/** What every route of the console shares: who may enter, its sessions, CSRF, the two shapes. */
interface Gate {
  readonly access: AdminAccess
  readonly source: ConsoleSource
  readonly sessions: Map<string, ConsoleSession>
  frameFor(
    caller: Caller,
    path: ConsolePath,
    title: string,
    notice?: PageFrame['notice'],
  ): PageFrame
  /** A GET page: admitted, rendered with the notice named in `?done=`. */
  view(path: ConsolePath, title: string, render: (f: PageFrame, url: URL) => Promise<string>): Route
  /** A POST change: admitted, same-origin, CSRF-checked, its form read, then audited. */
  change(act: ChangeAct): Route
}

/** What a change does; what it returns is audited. */
type ChangeAct = (
  form: URLSearchParams,
  caller: Caller,
  res: ServerResponse,
) => Promise<{ readonly audit?: Omit<AdminEvent, 'type' | 'actor' | 'outcome'> } | undefined>

function consoleGate(access: AdminAccess, source: ConsoleSource): Gate {
  const csrfKey = randomBytes(32)
  const sessions = new Map<string, ConsoleSession>()
  const csrfOf = (binding: string) =>
    createHmac('sha256', csrfKey).update(binding).digest('base64url')
  const admit = (req: IncomingMessage, res: ServerResponse) =>
    admitCaller(access, sessions, req, res)

  const frameFor = (
    caller: Caller,
    path: ConsolePath,
    title: string,
    notice?: PageFrame['notice'],
  ): PageFrame => ({
    path,
    title,
    csrf: csrfOf(caller.binding),
    actor: caller.actor,
    session: caller.session !== undefined,
    notice,
  })

  const view =
    (path: ConsolePath, title: string, render: (f: PageFrame, url: URL) => Promise<string>) =>
    async (req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        return sendText(res, 405, 'Use GET', { allow: 'GET, HEAD' })
      }
      const caller = await admit(req, res)
      if (!caller) return
      const url = new URL(req.url ?? '/', 'http://console')
      const done = url.searchParams.get('done')
      const notice = done && DONE[done] ? { text: DONE[done] } : undefined
      sendPage(res, 200, await render(frameFor(caller, path, title, notice), url), req.method)
    }

  const change = (act: ChangeAct) => async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') return sendText(res, 405, 'Use POST', { allow: 'POST' })
    const caller = await admit(req, res)
    if (!caller) return
    const refusal = sameOrigin(req.headers)
    if (refusal) return sendText(res, 403, refusal)
    const form = await readForm(req)
    if (typeof form === 'string') return sendText(res, form.startsWith('415') ? 415 : 413, form)
    if (!tokenMatches(form.get('csrf') ?? '', csrfOf(caller.binding))) {
      return sendText(res, 403, 'The CSRF token is missing or wrong; reload the page and try again')
    }
    try {
      const done = await act(form, caller, res)
      if (done?.audit) {
        await source.audit?.record({
          type: 'admin',
          actor: `console (${caller.actor})`,
          outcome: 'ok',
          ...done.audit,
        })
      }
    } catch (err) {
      if (res.headersSent) return
      const message = err instanceof BarbicanError ? err.message : String(err)
      return sendText(res, err instanceof BarbicanError ? 400 : 500, message)
    }
  }

  return { access, source, sessions, frameFor, view, change }
}

/** The caller, or undefined after answering (sign-in page, 401, 403). */
async function admitCaller(
  access: AdminAccess,
  sessions: Map<string, ConsoleSession>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<Caller | undefined> {
  if (access.authenticator === undefined) {
    if (access.loopback) return { actor: 'loopback', binding: 'loopback', session: undefined }
    sendPage(
      res,
      403,
      loginPage(
        frameOf('/admin/login', 'Admin console closed'),
        'The admin console is closed on a non-loopback bind without inbound authentication.',
      ),
    )
    return undefined
  }
  if (req.headers.authorization !== undefined) {
    const identity = await adminIdentity(access, req.headers)
    if (typeof identity === 'string') {
      sendPage(res, 403, loginPage(frameOf('/admin/login', 'Sign in'), identity))
      return undefined
    }
    return {
      actor: identity.subject,
      binding: `header:${req.headers.authorization}`,
      session: undefined,
    }
  }
  const sid = cookieOf(req.headers, COOKIE)
  const session = sid === undefined ? undefined : sessions.get(sid)
  if (sid !== undefined && session !== undefined) {
    if (Date.now() - session.lastSeen > CONSOLE_IDLE_MS) sessions.delete(sid)
    else {
      const identity = await adminIdentity(access, {
        authorization: `Bearer ${session.credential}`,
      })
      if (typeof identity !== 'string') {
        session.lastSeen = Date.now()
        return { actor: identity.subject, binding: `session:${sid}`, session: sid }
      }
      sessions.delete(sid)
    }
  }
  sendPage(res, 401, loginPage(frameOf('/admin/login', 'Sign in')))
  return undefined
}

const DONE: Readonly<Record<string, string>> = {
  approved:
    'Approved: the new definition is the pin, and the item is served from the next request.',
  rejected: 'Rejected: the item stays hidden while the server offers this definition.',
  revoked: 'Revoked: the key is refused from its next request.',
  unlinked: 'Unlinked: the user must link the account again before the next call to it.',
  reloaded: 'The config file was reloaded.',
  'reload-refused':
    'The config file was refused; the previous configuration keeps serving. See the last reload below.',
}

/** The admin identity for these headers, or why not. */
async function adminIdentity(
  access: AdminAccess,
  headers: IncomingHttpHeaders,
): Promise<Identity | string> {
  const result = await access.authenticator!.authenticate(headers, undefined)
  if (!result.ok) return result.message
  if (!isAdmin(result.identity)) return `The admin console needs the scope ${ADMIN_SCOPE}`
  // The console shows and changes the whole gateway; a tenant's admin would see other tenants.
  // Tenant admins use the admin API, which narrows every answer to their tenant (tenants.md).
  if (result.identity.tenant !== undefined) {
    return `The admin console is for the gateway's admins; tenant "${result.identity.tenant}" uses the admin API`
  }
  return result.identity
}

function needKeys(keys: ConsoleKeys | undefined): ConsoleKeys {
  if (!keys) {
    throw new BarbicanError('ERR_INVALID_PARAMS', 'API keys need auth.apiKeys in the configuration')
  }
  return keys
}

function pinOf(form: URLSearchParams): { upstream: string; key: string } {
  return { upstream: form.get('upstream') ?? '', key: form.get('key') ?? '' }
}

/**
 * A browser's change must come from the console's own origin. A request with no Origin (a
 * script with a bearer header) still needs the CSRF token, which only a page of the console
 * carries.
 */
function sameOrigin(headers: IncomingHttpHeaders): string | undefined {
  const origin = headers.origin
  if (origin === undefined) return undefined
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return 'The Origin header is malformed'
  }
  if (host !== headers.host)
    return `Changes must come from the console itself, not ${origin.slice(0, 200)}`
  return undefined
}

function tokenMatches(given: string, want: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(want)
  return a.length === b.length && timingSafeEqual(a, b)
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams | string> {
  if (!/^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? '')) {
    req.resume()
    return '415: a console change is an HTML form post (application/x-www-form-urlencoded)'
  }
  let size = 0
  const chunks: Buffer[] = []
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > CONSOLE_MAX_FORM_BYTES)
      return `The form is larger than ${CONSOLE_MAX_FORM_BYTES} bytes`
    chunks.push(chunk)
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
}

function cookieOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  for (const part of (headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=')
    if (k === name) return v.join('=')
  }
  return undefined
}

const frameOf = (path: PageFrame['path'], title: string): PageFrame => ({ path, title })

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // Not no-referrer: with it Chrome sends `Origin: null` on the console's own form posts.
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
}

function sendPage(res: ServerResponse, status: number, body: string, method = 'GET'): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  })
  res.end(method === 'HEAD' ? undefined : body)
}

function sendText(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    ...headers,
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
  })
  res.end(`${message}\n`)
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(303, { ...SECURITY_HEADERS, location, 'cache-control': 'no-store' })
  res.end()
}
