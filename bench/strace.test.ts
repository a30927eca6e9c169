import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { test } from 'node:test'
import { NODE } from './processes.ts'
import { countSyscalls, parseStraceSummary, totalCalls } from './strace.ts'

test('strace -c summaries are parsed, with and without an errors column', () => {
  const counts = parseStraceSummary(
    [
      '% time     seconds  usecs/call     calls    errors syscall',
      '------ ----------- ----------- --------- --------- ----------------',
      ' 61.22    0.000120           2        45           epoll_pwait',
      ' 20.00    0.000040           4        10         3 futex',
      '------ ----------- ----------- --------- --------- ----------------',
      '100.00    0.000160           2        55         3 total',
    ].join('\n'),
  )
  assert.deepEqual(counts, { epoll_pwait: 45, futex: 10 })
  assert.equal(totalCalls(counts), 55)
})

test('the syscalls of a running process are counted only while asked', async () => {
  // A child that does 300 fstat(2) calls for each line it reads.
  const child = spawn(
    NODE,
    [
      '-e',
      `const fs = require('node:fs'); require('node:readline').createInterface({ input: process.stdin }).on('line', () => { for (let i = 0; i < 300; i++) fs.fstatSync(0); process.stdout.write('done\\n') })`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  )
  try {
    child.stdin.write('warm\n')
    await once(child.stdout, 'data')
    const counts = await countSyscalls(child.pid!, async () => {
      child.stdin.write('go\n')
      await once(child.stdout, 'data')
    })
    assert.ok((counts.statx ?? counts.fstat ?? 0) >= 300, JSON.stringify(counts))
    assert.ok((counts.statx ?? counts.fstat ?? 0) < 600, 'the warm-up was not counted')
  } finally {
    child.kill()
  }
})
