/**
 * docs/decisions/README.md is the map of the decision records (issue 30): every record has its
 * line there, with a status, and every line names a record that exists.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { describe, it } from 'node:test'

const DIR = new URL('../../docs/decisions/', import.meta.url).pathname
const STATUS = /^(accepted|amended|superseded|planned)\b/

/** The index's rows, in order: record file name and status cell. */
function indexRows(): Array<readonly [string, string]> {
  const rows: Array<readonly [string, string]> = []
  for (const line of readFileSync(`${DIR}README.md`, 'utf8').split('\n')) {
    const row = /^\| \[\d{3}\]\((\d{3}-[^)]+\.md)\) \| .+ \| (.+) \|$/.exec(line)
    if (row) rows.push([row[1]!, row[2]!])
  }
  return rows
}

describe('the index of decision records', () => {
  const records = readdirSync(DIR).filter((f) => /^\d{3}-.+\.md$/.test(f))
  const listed = indexRows()
  const rows = new Map(listed)

  it('lists every record', () => {
    assert.ok(records.length > 50, `found only ${records.length} records in ${DIR}`)
    const missing = records.filter((r) => !rows.has(r))
    assert.deepEqual(
      missing,
      [],
      'add a line for each to docs/decisions/README.md: | [NNN](file) | title | accepted |',
    )
  })

  it('lists each record once', () => {
    const seen = new Set<string>()
    const twice = listed.map(([r]) => r).filter((r) => seen.has(r) || !seen.add(r))
    assert.deepEqual(twice, [], 'remove the second line of each from docs/decisions/README.md')
  })

  it('names only records that exist', () => {
    assert.deepEqual(
      [...rows.keys()].filter((r) => !records.includes(r)),
      [],
    )
  })

  it('gives each record a status', () => {
    const without = [...rows].filter(([, status]) => !STATUS.test(status)).map(([r]) => r)
    assert.deepEqual(without, [], 'status: accepted, amended by NNN, superseded by NNN, planned')
  })
})
