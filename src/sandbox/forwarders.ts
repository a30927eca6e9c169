/**
 * The listeners inside a bubblewrap sandbox's own network namespace (docs/sandbox.md): `socat`
 * processes on the sandbox's loopback, each carrying its connections over a unix socket bound in
 * from the host, where Barbican answers them. One listens for the egress proxy (ADR 040); one per
 * connect grant (a host:port the entry names in a URL) is a plain TCP forward to that host:port
 * alone (src/sandbox/connect-forward.ts), so PostgreSQL, Redis or a browser reach it by their own
 * protocol, with no proxy settings.
 *
 * Where a grant listens inside: a loopback address listens as itself (`127.0.0.1:5432` is
 * `127.0.0.1:5432` inside too, and `localhost` is `127.0.0.1`); a host name gets a loopback
 * address of its own (127.0.0.2, 127.0.0.3, …: Linux routes all of 127/8 to `lo`) and a line
 * in the sandbox's /etc/hosts, so two names on one port never collide. A literal address that is
 * not loopback (`10.0.0.5`) cannot be redirected without privileges in the network namespace: it
 * is left unreachable, and said so.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { join } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import type { ConnectGrant } from '../config/sandbox-grants.ts'
import { findExecutable } from './executables.ts'

/** Where the host-side sockets appear inside the sandbox. */
export const RUN_INSIDE = '/run/barbican'
/** Where the proxy's unix socket appears inside the sandbox. */
export const EGRESS_SOCKET_INSIDE = `${RUN_INSIDE}/egress.sock`
/** The sandbox-loopback port the forwarder inside listens on (HTTP(S)_PROXY points at it). */
export const EGRESS_PORT = 3128

/** One connect grant as it is carried: where it listens inside, and its socket on the host. */
export interface ConnectForwardPlan {
  readonly grant: ConnectGrant
  /** The sandbox-loopback address the listener binds (`127.0.0.1`, `127.0.0.2`, `::1`). */
  readonly address: string
  /** The socket's file name, the same in the host folder and in RUN_INSIDE. */
  readonly socket: string
  /** The name added to the sandbox's /etc/hosts for `address`, when the grant names a host. */
  readonly name?: string | undefined
}

/** How a sandbox's connect grants are carried, and those that cannot be. */
export interface ConnectPlan {
  readonly forwards: readonly ConnectForwardPlan[]
  /** Grants naming a literal non-loopback address, with why they stay unreachable. */
  readonly unreachable: ReadonlyArray<{ readonly grant: ConnectGrant; readonly reason: string }>
}

/** Decides where each grant listens inside (see the module comment); pure and deterministic. */
export function planConnects(connect: readonly ConnectGrant[] | undefined): ConnectPlan {
  const forwards: ConnectForwardPlan[] = []
  const unreachable: Array<{ grant: ConnectGrant; reason: string }> = []
  const taken = new Set<string>()
  const named = new Map<string, string>()
  for (const grant of connect ?? []) {
    const host = grant.host.replace(/^\[|\]$/g, '').toLowerCase()
    let address: string
    let name: string | undefined
    if (isIP(host) === 4 && host.startsWith('127.')) address = host
    else if (host === '::1') address = '::1'
    else if (host === 'localhost') address = '127.0.0.1'
    else if (isIP(host) !== 0) {
      unreachable.push({
        grant,
        reason: `${host} is an address, not a name: only loopback addresses and host names can be forwarded into the sandbox`,
      })
      continue
    } else {
      address = named.get(host) ?? `127.0.0.${named.size + 2}`
      named.set(host, address)
      name = host
    }
    // Two grants that land on one listener (localhost:5432 and 127.0.0.1:5432) are one forward.
    if (taken.has(`${address} ${grant.port}`)) continue
    taken.add(`${address} ${grant.port}`)
    forwards.push({ grant, address, socket: `connect-${forwards.length}.sock`, name })
  }
  return { forwards, unreachable }
}

/** The hosts file a sandbox with named connect grants sees: the host's, plus those names. */
export function writeSandboxHosts(dir: string, forwards: readonly ConnectForwardPlan[]): string {
  let base = ''
  try {
    base = readFileSync('/etc/hosts', 'utf8')
  } catch {
    base = '127.0.0.1 localhost\n::1 localhost\n'
  }
  const lines = forwards.filter((f) => f.name !== undefined).map((f) => `${f.address} ${f.name}`)
  const file = join(dir, 'hosts')
  writeFileSync(
    file,
    `${base.endsWith('\n') ? base : `${base}\n`}# Barbican: hosts this server may connect to\n${lines.join('\n')}\n`,
    { mode: 0o644 },
  )
  return file
}

/** Where /etc/hosts really is (a link on some systems), for binding the sandbox's over it. */
export function hostsPath(): string {
  try {
    return realpathSync('/etc/hosts')
  } catch {
    return '/etc/hosts'
  }
}

/** One listener for FORWARDER_SCRIPT: socat's listen address, its socket, its /proc/net line. */
function listenerArgs(address: string, port: number, socket: string): string[] {
  const v6 = address.includes(':')
  const listen = v6
    ? `TCP6-LISTEN:${port},bind=[${address}],ipv6only=1,reuseaddr,fork`
    : `TCP4-LISTEN:${port},bind=${address},reuseaddr,fork`
  return [listen, socket, procNetEntry(address, port)]
}

/** How /proc/net/tcp{,6} writes a local address: each 32-bit word in little-endian hex. */
export function procNetEntry(address: string, port: number): string {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0')
  if (!address.includes(':')) {
    const bytes = address
      .split('.')
      .map((b) => Number(b).toString(16).toUpperCase().padStart(2, '0'))
    return `${bytes.reverse().join('')}:${hexPort}`
  }
  // Only ::1 is ever listened on: three zero words, then 1 in little-endian.
  return `${'0'.repeat(24)}01000000:${hexPort}`
}

/**
 * Starts the listeners inside the sandbox, then the server: each socat listens on the sandbox's
 * own loopback and carries each connection to its unix socket. The server starts once every port
 * listens (read from /proc/net/tcp and tcp6, without any helper program), so its first connection
 * cannot race a forwarder. `$1` is socat, `$2` sleep, `$3` the number of listeners, then three
 * words per listener (socat's listen address, the socket, the /proc/net entry), then the server's
 * command line.
 */
export const FORWARDER_SCRIPT = [
  'socat=$1; pause=$2; n=$3; shift 3',
  'wanted=',
  'while [ "$n" -gt 0 ]; do',
  '  "$socat" "$1" "UNIX-CONNECT:$2" </dev/null &',
  '  wanted="$wanted $3"; shift 3; n=$((n - 1))',
  'done',
  'up() { for f in /proc/net/tcp /proc/net/tcp6; do [ -r "$f" ] || continue; while read -r _ local _; do [ "$local" = "$1" ] && return 0; done <"$f"; done; return 1; }',
  // A pause between looks leaves the CPU to socat on a busy machine; 1000 × 10 ms at most.
  'for entry in $wanted; do',
  '  i=0',
  '  while ! up "$entry"; do i=$((i + 1)); [ "$i" -gt 1000 ] && { echo "barbican: a sandbox forwarder did not start" >&2; exit 70; }; "$pause" 0.01; done',
  'done',
  'exec "$@"',
].join('\n')

/** The command line prefix that runs FORWARDER_SCRIPT with the egress and connect listeners. */
export function forwarderPrefix(
  name: string,
  egress: boolean,
  forwards: readonly ConnectForwardPlan[],
): string[] {
  const socat = findExecutable('socat')
  const sleep = findExecutable('sleep') ?? '/bin/sleep'
  if (socat === undefined) {
    const why = egress
      ? 'lists hosts in sandbox.network.allow'
      : `names ${forwards.map((f) => `${f.grant.host}:${f.grant.port}`).join(', ')} to connect to`
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `upstream "${name}" ${why}, but this host lacks socat, which carries its connections ` +
        'out of the sandbox (Debian: apt-get install socat). Install it, or remove the hosts ' +
        '(no network) or set sandbox: none.',
    )
  }
  const listeners: string[][] = []
  if (egress) listeners.push(listenerArgs('127.0.0.1', EGRESS_PORT, EGRESS_SOCKET_INSIDE))
  for (const f of forwards) {
    listeners.push(listenerArgs(f.address, f.grant.port, `${RUN_INSIDE}/${f.socket}`))
  }
  return [
    '/bin/sh',
    '-c',
    FORWARDER_SCRIPT,
    'barbican-forwarders',
    socat,
    sleep,
    String(listeners.length),
    ...listeners.flat(),
  ]
}

/**
 * The proxy variables a confined server with egress gets (Node's and everyone else's). Hosts
 * reached by a connect forward are left out of the proxy (`NO_PROXY`): they are direct inside.
 */
export function proxyEnvironment(
  forwards: readonly ConnectForwardPlan[] = [],
): Array<readonly [string, string]> {
  const url = `http://127.0.0.1:${EGRESS_PORT}`
  const direct = [
    ...new Set(forwards.flatMap((f) => [f.grant.host.replace(/^\[|\]$/g, ''), f.address])),
  ].join(',')
  return [
    ['HTTP_PROXY', url],
    ['HTTPS_PROXY', url],
    ['http_proxy', url],
    ['https_proxy', url],
    ['NO_PROXY', direct],
    ['no_proxy', direct],
    // Node 22.21+ and 24: fetch and http(s) use the variables above only when asked to.
    ['NODE_USE_ENV_PROXY', '1'],
  ]
}
