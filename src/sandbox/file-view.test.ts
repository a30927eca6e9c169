import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileViewArgs } from './file-view.ts'

const root = mkdtempSync(join(tmpdir(), 'barbican-file-view-'))
after(() => rmSync(root, { recursive: true, force: true }))

/** The bwrap mounts after the system part, as [flag, source, destination] or [flag, path]. */
function mounts(args: string[]): string[][] {
  const out: string[][] = []
  const start = args.indexOf('/tmp') + 1
  for (let i = start; i < args.length; ) {
    const flag = args[i]!
    const arity = flag === '--tmpfs' ? 1 : flag === '--perms' ? 1 : flag === '--dir' ? 1 : 2
    out.push(args.slice(i, i + arity + 1))
    i += arity + 1
  }
  return out.filter(([flag]) => flag !== '--perms' && flag !== '--dir')
}

describe('the file view', () => {
  // A project whose folder is granted (a data file beside the config) holds `.barbican/`, the
  // server's state directory inside it, and a package: each must survive its parent's bind.
  const project = join(root, 'project')
  const own = join(project, '.barbican')
  const state = join(own, 'state', 'memory')
  const pkg = join(project, 'node_modules', 'server')
  mkdirSync(state, { recursive: true })
  mkdirSync(pkg, { recursive: true })
  writeFileSync(join(project, 'barbican.json'), '{}')

  test('binds parents before children, so a folder inside a grant stays visible', () => {
    const args = fileViewArgs(
      { readOnly: [pkg], readWrite: [state, project], masked: [], links: [] },
      [],
    )
    const order = mounts(args).map((m) => m.at(-1))
    assert.ok(order.indexOf(project) < order.indexOf(pkg), order.join('\n'))
    assert.ok(order.indexOf(project) < order.indexOf(state), order.join('\n'))
  })

  test("masks Barbican's files after the binds they cover, and binds the state directory after its mask", () => {
    const config = join(project, 'barbican.json')
    const args = fileViewArgs(
      { readOnly: [], readWrite: [state, project], masked: [own, config], links: [] },
      [],
    )
    const list = mounts(args)
    const at = (flag: string, dest: string) =>
      list.findIndex((m) => m[0] === flag && m.at(-1) === dest)
    assert.ok(at('--bind-try', project) < at('--tmpfs', own))
    assert.ok(at('--tmpfs', own) < at('--bind-try', state), list.join('\n'))
    assert.ok(at('--bind-try', project) < at('--ro-bind', config))
  })

  test('binds a staged source at the grant’s own place', () => {
    const stage = join(root, 'stage')
    const args = fileViewArgs(
      { readOnly: [], readWrite: [project], masked: [], links: [] },
      [],
      new Map([[project, stage]]),
    )
    assert.ok(mounts(args).some((m) => m.join(' ') === `--bind-try ${stage} ${project}`))
  })
})
