import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  exitReport,
  redactSecrets,
  STDERR_TAIL_LINE_CHARS,
  STDERR_TAIL_LINES,
  StderrTail,
  spawnFailure,
} from './exit-report.ts'

describe('what Barbican says about a stdio upstream that went away', () => {
  test('redacts what looks like a secret and keeps the rest of the line', () => {
    const cases: [string, string][] = [
      ['auth failed: token=abc123def456', 'auth failed: token=[redacted]'],
      ['GITHUB_TOKEN: ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxx', 'GITHUB_TOKEN: [redacted]'],
      ['{"apiKey": "k-123456"}', '{"apiKey": "[redacted]"}'],
      ['DB_PASSWORD=hunter2 host=db', 'DB_PASSWORD=[redacted] host=db'],
      [
        'Authorization: Bearer eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl',
        'Authorization: Bearer [redacted]',
      ],
      ['using sk-ant-api03-abcdefghijklmnopqrstu', 'using [redacted]'],
      ['postgres://app:s3cret@db:5432/x', 'postgres://app:[redacted]@db:5432/x'],
      ['key AKIAABCDEFGHIJKLMNOP', 'key [redacted]'],
      ['listening on port 3000', 'listening on port 3000'],
    ]
    for (const [line, expected] of cases) assert.equal(redactSecrets(line), expected, line)
  })

  test('keeps only the last lines, each cut, without colour codes or blank lines', () => {
    const tail = new StderrTail()
    for (let i = 0; i < STDERR_TAIL_LINES + 5; i++) tail.push(`line ${i}`)
    tail.push('')
    tail.push('\x1b[31merror\x1b[0m: red\r')
    tail.push('x'.repeat(STDERR_TAIL_LINE_CHARS + 50))
    assert.equal(tail.lines.length, STDERR_TAIL_LINES)
    assert.equal(tail.lines.at(-2), 'error: red')
    assert.equal(tail.lines.at(-1), `${'x'.repeat(STDERR_TAIL_LINE_CHARS)}…`)
  })

  test('names the exit code or the signal, then quotes the last stderr lines', () => {
    assert.equal(
      exitReport({ code: 3, signal: null }, ['a', 'b']),
      'exited with code 3; stderr: a | b',
    )
    assert.equal(
      exitReport({ code: null, signal: 'SIGKILL' }, []),
      'was killed by SIGKILL; it wrote nothing on stderr',
    )
    const many = ['1', '2', '3', '4', '5', '6', '7']
    assert.equal(
      exitReport({ code: 1, signal: null }, many),
      'exited with code 1; stderr: 3 | 4 | 5 | 6 | 7',
    )
    assert.equal(
      exitReport({ code: 1, signal: null }, [], 'a note'),
      'exited with code 1; it wrote nothing on stderr; a note',
    )
  })

  test('a spawn ENOENT says what is missing: the command on PATH, the file, or the directory', () => {
    assert.match(
      spawnFailure('ENOENT', 'spawn x ENOENT', { command: 'uvx', path: '/usr/bin:/bin' }),
      /^command "uvx" is not on PATH \(PATH=\/usr\/bin:\/bin\)/,
    )
    assert.equal(
      spawnFailure('ENOENT', 'spawn x ENOENT', { command: '/opt/srv/bin/srv', path: '/bin' }),
      '/opt/srv/bin/srv does not exist',
    )
    assert.equal(
      spawnFailure('ENOENT', 'spawn x ENOENT', {
        command: 'node',
        path: '/bin',
        cwd: '/nonexistent/dir',
      }),
      'the working directory /nonexistent/dir does not exist',
    )
    assert.equal(
      spawnFailure('EACCES', 'spawn x EACCES', { command: './srv', path: '/bin' }),
      './srv is not executable (EACCES)',
    )
    assert.equal(
      spawnFailure('E2BIG', 'spawn E2BIG', { command: 'x', path: '/bin' }),
      'spawn E2BIG',
    )
  })
})
