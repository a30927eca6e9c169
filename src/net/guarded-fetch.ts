/**
 * The one HTTP client for URLs Barbican fetches on its own (OAuth discovery, JWKS, token and
 * introspection endpoints): http(s) only, plain http only to allowlisted loopback addresses,
 * private, loopback and link-local targets refused unless allowlisted, every redirect re-checked.
 * The check runs on the addresses DNS returns at connect time (undici's `lookup` hook), so a
 * name that resolves to a public address when checked and to a private one when used (DNS
 * rebinding) cannot slip through. Nothing here ever hands a URL to a shell or a browser.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import type { Agent, Dispatcher } from 'undici'
import { undici } from '../common/lazy-deps.ts'
import { AddressAllowlist, classifyAddress, unbracket } from './address-policy.ts'

/** Why a fetch was refused before any byte was sent; `code` is stable for programs. */
export class FetchRefusedError extends Error {
  override readonly name = 'FetchRefusedError'
  readonly code = 'ERR_FETCH_REFUSED'
}

export interface GuardedFetchOptions {
  /** Host names, IP addresses and CIDR ranges that may be reached although special. */
  readonly allow?: readonly string[] | undefined
  /** Most redirects followed, each re-checked (default 5). */
  readonly maxRedirects?: number | undefined
  /** Deadline of one fetch including redirects (default 10 s). */
  readonly timeoutMs?: number | undefined
}

/** A fetch-compatible function with the guard built in; `close()` releases its sockets. */
export interface GuardedFetch {
  (input: string | URL, init?: RequestInit): Promise<Response>
  close(): Promise<void>
}

const REDIRECTS = new Set([301, 302, 303, 307, 308])

/** Creates a guarded client; each one owns a small keep-alive pool. */
export function createGuardedFetch(options: GuardedFetchOptions = {}): GuardedFetch {
  const allow = new AddressAllowlist(options.allow ?? [])
  const maxRedirects = options.maxRedirects ?? 5
  const timeoutMs = options.timeoutMs ?? 10_000
  // Made on the first fetch, so that a gateway which never fetches never loads undici.
  let dispatchers: { https: Agent; http: Agent } | undefined

  const guarded = async (input: string | URL, init: RequestInit = {}): Promise<Response> => {
    let url = new URL(input)
    let method = (init.method ?? 'GET').toUpperCase()
    let body = init.body
    const headers = new Headers(init.headers)
    const signal = init.signal
      ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)])
      : AbortSignal.timeout(timeoutMs)
    for (let hop = 0; ; hop++) {
      checkUrl(url, allow)
      dispatchers ??= { https: guardedAgent(allow, false), http: guardedAgent(allow, true) }
      const dispatcher: Dispatcher = url.protocol === 'http:' ? dispatchers.http : dispatchers.https
      const response = (await undici().fetch(url, {
        method,
        headers: Object.fromEntries(headers),
        body: body as never,
        redirect: 'manual',
        signal,
        dispatcher,
      })) as unknown as Response
      if (!REDIRECTS.has(response.status)) return response
      const location = response.headers.get('location')
      await response.body?.cancel()
      if (location === null) return response
      if (hop >= maxRedirects) {
        throw new FetchRefusedError(`Too many redirects (more than ${maxRedirects}) from ${input}`)
      }
      const next = new URL(location, url)
      // Credentials never follow a redirect to another origin.
      if (next.origin !== url.origin) {
        headers.delete('authorization')
        headers.delete('cookie')
      }
      if (
        response.status === 303 ||
        ((response.status === 301 || response.status === 302) && method === 'POST')
      ) {
        method = 'GET'
        body = undefined
        headers.delete('content-type')
      }
      url = next
    }
  }
  return Object.assign(guarded, {
    async close() {
      if (dispatchers) await Promise.all([dispatchers.http.close(), dispatchers.https.close()])
    },
  })
}

/** Scheme and literal-address checks, before any DNS lookup. */
function checkUrl(url: URL, allow: AddressAllowlist): void {
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new FetchRefusedError(`Only http(s) URLs may be fetched, not ${url.protocol}`)
  }
  if (url.username || url.password) {
    throw new FetchRefusedError('URLs with embedded credentials are refused')
  }
  const host = unbracket(url.hostname)
  if (isIP(host)) {
    checkAddress(url.hostname, host, allow, url.protocol === 'http:')
  } else if (url.protocol === 'http:' && !allow.allows(host)) {
    throw new FetchRefusedError(
      `Plain http is only allowed to allowlisted loopback hosts, not ${url.hostname}`,
    )
  }
}

function checkAddress(host: string, address: string, allow: AddressAllowlist, http: boolean) {
  const kind = classifyAddress(address)
  if (http && kind !== 'loopback') {
    throw new FetchRefusedError(`Plain http is only allowed to loopback addresses, not ${host}`)
  }
  if (kind !== 'public' && !allow.allows(host, address)) {
    throw new FetchRefusedError(
      `Refusing to connect to ${host} (${address}): a ${kind} address that is not allowlisted`,
    )
  }
}

/** An undici Agent whose DNS answers are checked before the socket connects. */
function guardedAgent(allow: AddressAllowlist, http: boolean): Agent {
  const lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0)
      try {
        for (const a of addresses) checkAddress(hostname, a.address, allow, http)
      } catch (refusal) {
        return callback(refusal as Error, '', 0)
      }
      if ((options as { all?: boolean }).all) {
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses)
      }
      const first = addresses[0]!
      callback(null, first.address, first.family)
    })
  }
  return new (undici().Agent)({ connect: { lookup }, keepAliveTimeout: 5_000 })
}
