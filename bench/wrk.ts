/**
 * wrk (C, Debian package `wrk`) as a load generator for 2026-07-28 stateless calls: a 2026
 * `tools/call` is one POST with a static body and headers (mcp-http.ts `statelessToolCall`), so
 * wrk can send it from a generated Lua script, keeping `connections` requests in flight from one
 * thread. It costs a fraction of bench/load.ts's CPU per call, which matters where the load
 * generator shares a core with the upstream and the servers (bench/fleet.ts --pin).
 *
 * wrk checks no reply itself, so the script's `response()` counts as a failure every reply that
 * is not HTTP 200, mentions "error" (any case: a JSON-RPC error, an `isError` result) or lacks
 * the echo of the text sent. Its `done()` prints one line that `parseWrkOutput` reads.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { statelessToolCall, type Target } from './mcp-http.ts'

/** The wrk binary, if installed. */
export const WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => existsSync(p))

/** The text every call echoes (the body is static, so it is the same for every call). */
const TEXT = 'wrk'

/** What one wrk run produced. */
export interface WrkResult {
  /** Replies received (wrk's count: failed ones included). */
  readonly requests: number
  /** Replies that were not a successful echo (see the header). */
  readonly failures: number
  /** The first failed reply: status and the start of its body ('' if none). */
  readonly firstFailure: string
  /** wrk's socket errors: connect, read, write and timeouts (non-2xx are in `failures`). */
  readonly socketErrors: number
  readonly elapsedMs: number
  readonly p50Ms: number
  readonly p99Ms: number
  /** wrk's own CPU time over its run (user + system, µs; 10 ms resolution), NaN if unread. */
  readonly cpuUs: number
}

const CLOCK_TICK_US = 10_000

/** `s` as a Lua string literal (quotes and backslashes escaped, control bytes as `\ddd`). */
function lua(s: string): string {
  let escaped = ''
  for (const c of s) {
    const code = c.charCodeAt(0)
    if (c === '\\' || c === '"') escaped += `\\${c}`
    else if (code < 0x20 || code === 0x7f) escaped += `\\${String(code).padStart(3, '0')}`
    else escaped += c
  }
  return `"${escaped}"`
}

/** The Lua script that makes wrk send `target` one 2026 `tools/call echo` per request. */
export function wrkScript(target: Target): string {
  const { body, headers } = statelessToolCall(target, 1, TEXT)
  return [
    'wrk.method = "POST"',
    `wrk.body = ${lua(body)}`,
    ...Object.entries(headers).map(([k, v]) => `wrk.headers[${lua(k)}] = ${lua(v)}`),
    `local expected = ${lua(`echo: ${TEXT}`)}`,
    'local threads = {}',
    'function setup(thread) table.insert(threads, thread) end',
    'function init(args) failures = 0; first = "" end',
    'function response(status, headers, body)',
    '  if status ~= 200 or string.find(string.lower(body), "error", 1, true)',
    '      or not string.find(body, expected, 1, true) then',
    '    failures = failures + 1',
    '    if first == "" then first = status .. " " .. string.sub(body, 1, 200) end',
    '  end',
    'end',
    'function done(summary, latency, requests)',
    '  local failed, first_failure = 0, ""',
    '  for _, t in ipairs(threads) do',
    '    failed = failed + t:get("failures")',
    '    if first_failure == "" then first_failure = t:get("first") end',
    '  end',
    '  local e = summary.errors',
    // wrk's own CPU (utime + stime, clock ticks): the load generator's cost, read before it exits.
    '  local ticks = -1',
    '  local f = io.open("/proc/self/stat", "r")',
    '  if f then',
    '    local fields = {}',
    '    for x in string.gmatch(string.match(f:read("*a"), ".*%) (.*)"), "%S+") do',
    '      table.insert(fields, x)',
    '    end',
    '    f:close()',
    '    ticks = tonumber(fields[12]) + tonumber(fields[13])',
    '  end',
    '  io.write(string.format("wrk-result %.0f %.0f %.0f %.0f %.0f %.0f %.0f\\n",',
    '    summary.requests, summary.duration, failed, e.connect + e.read + e.write + e.timeout,',
    '    latency:percentile(50), latency:percentile(99), ticks))',
    '  io.write("wrk-first-failure ", (string.gsub(first_failure, "\\n", " ")), "\\n")',
    'end',
    '',
  ].join('\n')
}

/** Reads the line the script's `done()` printed; throws if wrk did not get that far. */
export function parseWrkOutput(stdout: string): WrkResult {
  const m = /^wrk-result (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (-?\d+)$/m.exec(stdout)
  if (!m) throw new Error(`wrk printed no result: ${stdout.slice(-500)}`)
  const [requests, durationUs, failures, socketErrors, p50Us, p99Us, ticks] = m.slice(1).map(Number)
  return {
    requests: requests!,
    failures: failures!,
    firstFailure: /^wrk-first-failure (.*)$/m.exec(stdout)?.[1]?.trim() ?? '',
    socketErrors: socketErrors!,
    elapsedMs: durationUs! / 1000,
    p50Ms: p50Us! / 1000,
    p99Ms: p99Us! / 1000,
    cpuUs: ticks! < 0 ? Number.NaN : ticks! * CLOCK_TICK_US,
  }
}

/**
 * Starts wrk against `target` for `seconds` (wrk's resolution) with `connections` connections on
 * one thread and latency recording on; with `cpu`, wrk runs pinned to that CPU from its start
 * (`taskset -c`). Returns its PID and its result once it has exited.
 */
export function startWrk(
  target: Target,
  options: { connections: number; seconds: number; scriptPath: string; cpu?: number },
): { pid: number; result: Promise<WrkResult> } {
  if (!WRK) throw new Error('wrk is not installed (Debian package `wrk`)')
  const args = [
    '-t',
    '1',
    '-c',
    String(options.connections),
    '-d',
    `${options.seconds}s`,
    '--latency',
    '-s',
    options.scriptPath,
    target.url,
  ]
  const child =
    options.cpu === undefined
      ? spawn(WRK, args, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('taskset', ['-c', String(options.cpu), WRK, ...args], {
          stdio: ['ignore', 'pipe', 'pipe'],
        })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8')
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8')
  })
  const result = new Promise<WrkResult>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => {
      try {
        if (code !== 0) throw new Error(`wrk exited (${code})`)
        // wrk reports a script that fails to load on stderr and runs on without it.
        if (stderr.trim() !== '') throw new Error('wrk wrote to stderr')
        resolve(parseWrkOutput(stdout))
      } catch (error) {
        reject(new Error(`${(error as Error).message}: ${stderr}${stdout.slice(-500)}`))
      }
    })
  })
  return { pid: child.pid!, result }
}
