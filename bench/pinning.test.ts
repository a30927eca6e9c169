import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { test } from 'node:test'
import { busyBetween, childrenOf, cpuTimes, descendantsOf, pin } from './pinning.ts'
import { contextSwitches, NODE } from './processes.ts'

const mask = (pid: number) =>
  /mask:\s*([0-9a-f]+)/.exec(
    spawnSync('taskset', ['-p', String(pid)], { encoding: 'utf8' }).stdout,
  )?.[1]

test('a process is pinned to one CPU and given back its mask', async () => {
  const child = spawn(NODE, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
  try {
    await new Promise((resolve) => setTimeout(resolve, 200))
    const before = mask(child.pid!)
    const restore = pin([child.pid!], 1)
    assert.equal(mask(child.pid!), '2')
    restore()
    assert.equal(mask(child.pid!), before)
    assert.deepEqual(childrenOf(process.pid), [child.pid])
  } finally {
    child.kill()
    await once(child, 'exit')
  }
})

test('descendants reach a grandchild, as a sandboxed upstream is', async () => {
  // The child starts a grandchild and prints its PID.
  const child = spawn(
    NODE,
    [
      '-e',
      "const c = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }); console.log(c.pid); setInterval(() => {}, 1000)",
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
  let grandchild = 0
  try {
    const [line] = (await once(child.stdout!, 'data')) as [Buffer]
    grandchild = Number(line.toString().trim())
    assert.deepEqual(childrenOf(child.pid!), [grandchild])
    assert.deepEqual(descendantsOf(process.pid), [child.pid, grandchild])
  } finally {
    if (grandchild > 0) process.kill(grandchild)
    child.kill()
    await once(child, 'exit')
  }
})

test('a sleeping process counts voluntary switches; a spinning one keeps a CPU busy', async () => {
  const child = spawn(
    NODE,
    ['-e', 'let n = 0; const t = setInterval(() => { if (++n === 50) clearInterval(t) }, 2)'],
    { stdio: 'ignore' },
  )
  await new Promise((resolve) => setTimeout(resolve, 60))
  const switches = contextSwitches(child.pid!)
  await once(child, 'exit')
  assert.ok(switches.voluntary >= 10, JSON.stringify(switches))

  const restore = pin([process.pid], 0)
  try {
    const a = cpuTimes()
    const until = Date.now() + 300
    while (Date.now() < until) {}
    const busy = busyBetween(a, cpuTimes())
    assert.equal(busy.length, a.length)
    assert.ok(busy[0]! > 0.5, `CPU 0 busy ${busy[0]}`)
  } finally {
    restore()
  }
})
