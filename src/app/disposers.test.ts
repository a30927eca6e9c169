import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Disposers } from './disposers.ts'

test('steps run last-pushed first, each after the previous one settled', async () => {
  const stack = new Disposers()
  const order: string[] = []
  stack.push('store', () => order.push('store'))
  stack.push('audit', async () => {
    await new Promise((resolve) => setTimeout(resolve, 10))
    order.push('audit')
  })
  stack.push('server', () => order.push('server'))
  assert.deepEqual(stack.names, ['server', 'audit', 'store'])
  await stack.dispose()
  assert.deepEqual(order, ['server', 'audit', 'store'])
  assert.deepEqual(stack.names, [])
})

test('a failing step is reported and the ones below it still run', async () => {
  const stack = new Disposers()
  const order: string[] = []
  const failures: string[] = []
  stack.push('redis', () => order.push('redis'))
  stack.push('audit', () => {
    throw new Error('checkpoint failed')
  })
  stack.push('server', () => order.push('server'))
  await stack.dispose((name, error) => failures.push(`${name}: ${(error as Error).message}`))
  assert.deepEqual(order, ['server', 'redis'])
  assert.deepEqual(failures, ['audit: checkpoint failed'])
})

test('disposing twice runs each step once, and nothing can be added meanwhile', async () => {
  const stack = new Disposers()
  let runs = 0
  stack.push('one', () => runs++)
  const first = stack.dispose()
  assert.equal(stack.dispose(), first)
  await first
  assert.equal(runs, 1)
  assert.throws(
    () => stack.push('late', () => {}),
    /cannot add "late": the application is stopping/,
  )
})
