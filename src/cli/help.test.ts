import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { COMMANDS } from './help.ts'
import { main } from './main.ts'

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const code = await main(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) })
  return { code, out, err }
}

describe('barbican --help', () => {
  test('the usage lists every command and shows an example', async () => {
    const { code, out } = await run(['--help'])
    assert.equal(code, 0)
    for (const command of COMMANDS) assert.match(out, new RegExp(`^  ${command} `, 'm'))
    assert.match(out, /Example:\n {2}barbican serve/)
  })

  for (const command of COMMANDS) {
    test(`${command} --help and help ${command} explain ${command}, with an example`, async () => {
      for (const argv of [
        [command, '--help'],
        ['help', command],
        [command, '-h'],
      ]) {
        const { code, out, err } = await run(argv)
        assert.equal(code, 0, err)
        assert.match(out, new RegExp(`^Usage: barbican ${command}`), argv.join(' '))
        assert.match(out, /\nExample[^:\n]*:\n {2}\S/, argv.join(' '))
      }
    })
  }

  test('help for an unknown command is a usage error', async () => {
    const { code, err } = await run(['help', 'nope'])
    assert.equal(code, 2)
    assert.match(err, /unknown command "nope"/)
  })
})
