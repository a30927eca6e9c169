/**
 * Who a confined server is (ADR 110): its `HOME` is its state directory under every mechanism
 * (what it keeps "at home" persists, and nothing of the operator's home is reachable), and it
 * has a `USER` and `LOGNAME`, since some servers and libraries fail without them (Python's
 * `getpass.getuser()`, tools that build a per-user path). The name is the one its uid has:
 * Barbican's own user where the server keeps Barbican's uid (bubblewrap without root, the
 * Node.js permission model), else, when a root gateway switches it to its own uid (ADR 030),
 * `barbican-NAME`, with a line for that uid in the sandbox's own `/etc/passwd` and `/etc/group`
 * so that a lookup by uid (`os.userInfo()`, `id`, `whoami`, git's identity) finds it too.
 * A `USER` or `LOGNAME` the entry's `env` declares is kept.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { userInfo } from 'node:os'

/** The user name a root gateway's sandbox uid gets: `barbican-NAME`, at most 32 characters. */
export function sandboxUserName(name: string): string {
  const safe = name.toLowerCase().replace(/[^a-z0-9_-]/g, '_')
  return `barbican-${safe}`.slice(0, 32)
}

/** Barbican's own user name: its passwd entry, else its environment, else `uid-N`. */
export function hostUserName(): string {
  try {
    return userInfo().username
  } catch {
    // A uid without a passwd entry (a container run with an arbitrary uid).
    return process.env.USER ?? process.env.LOGNAME ?? `uid-${process.getuid?.() ?? 0}`
  }
}

/**
 * `HOME`, `USER` and `LOGNAME` of a confined server: HOME its state directory (always: it is
 * the one folder surely its own), USER and LOGNAME as the entry declares them, else `user`.
 */
export function identityEnvironment(
  declared: Readonly<Record<string, string>>,
  home: string,
  user: string,
): Record<string, string> {
  return {
    HOME: home,
    USER: declared.USER ?? user,
    LOGNAME: declared.LOGNAME ?? declared.USER ?? user,
  }
}

/**
 * Writes the sandbox's `/etc/passwd` and `/etc/group` for a root gateway's sandbox uid beside
 * the state directory (`STATE.passwd`, `STATE.group`: root's, never bound writable), the host's
 * lines plus one for `uid`, and returns the bwrap arguments that bind them read-only over the
 * host's. The host's files are readable inside already, so nothing new is disclosed.
 */
export function identityFiles(stateDir: string, uid: number, user: string, name: string): string[] {
  const args: string[] = []
  const files = [
    [
      '/etc/passwd',
      `${stateDir}.passwd`,
      `${user}:x:${uid}:${uid}:Barbican upstream ${name}:${stateDir}:/bin/sh`,
    ],
    ['/etc/group', `${stateDir}.group`, `${user}:x:${uid}:`],
  ] as const
  for (const [host, copy, line] of files) {
    if (!existsSync(host)) continue
    const lines = readFileSync(host, 'utf8')
      .split('\n')
      .filter((l) => l !== '' && l.split(':')[2] !== String(uid))
    writeFileSync(copy, `${[...lines, line].join('\n')}\n`, { mode: 0o644 })
    args.push('--ro-bind', copy, host)
  }
  return args
}
