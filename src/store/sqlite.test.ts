import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { storeContract } from '../../test/contracts/store.ts'
import { openSqliteStore } from './sqlite.ts'

const dir = mkdtempSync(join(tmpdir(), 'barbican-sqlite-'))
after(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

storeContract('sqlite', () => openSqliteStore(join(dir, `t${n++}`, 'barbican.db')))

test("sqlite: a second connection to the same file sees the first one's writes and revision", async () => {
  const path = join(dir, 'shared', 'barbican.db')
  const gateway = await openSqliteStore(path)
  const cli = await openSqliteStore(path)
  try {
    const before = await gateway.pins.revision()
    await cli.pins.pin({
      upstream: 'a',
      key: 'tool:x',
      kind: 'tool',
      name: 'x',
      hash: 'h',
      definition: {},
      approvedAt: 'now',
      approvedBy: 'op',
    })
    assert.notEqual(await gateway.pins.revision(), before)
    assert.equal((await gateway.pins.pinned('a')).length, 1)
  } finally {
    await gateway.close()
    await cli.close()
  }
})

test('sqlite: reopening a file keeps its data and does not rerun migrations', async () => {
  const path = join(dir, 'reopen', 'barbican.db')
  const first = await openSqliteStore(path)
  await first.baselines.put({ name: 'c', hash: 'h', document: 1, approvedAt: 'a', approvedBy: 'b' })
  await first.close()
  const second = await openSqliteStore(path)
  try {
    assert.equal((await second.baselines.get('c'))?.hash, 'h')
  } finally {
    await second.close()
  }
})
