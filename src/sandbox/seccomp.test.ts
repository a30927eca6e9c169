import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  auditArch,
  deniedNumber,
  modeCheckedCall,
  SECCOMP_DENIED,
  type SeccompArch,
  seccompProgram,
  seccompVerdict,
} from './seccomp.ts'

describe('the seccomp filter', () => {
  for (const arch of ['x64', 'arm64'] as SeccompArch[]) {
    const program = seccompProgram(arch)
    const verdict = (nr: number, arg0?: number) =>
      seccompVerdict(program, {
        arch: auditArch(arch),
        nr,
        ...(arg0 === undefined ? {} : { arg0 }),
      })

    test(`${arch}: refuses every listed system call with EPERM`, () => {
      for (const name of SECCOMP_DENIED.filter((n) => !n.includes('('))) {
        assert.equal(verdict(deniedNumber(arch, name)!), 'EPERM', name)
      }
    })

    test(`${arch}: allows ordinary calls and a plain clone; refuses clone with CLONE_NEWUSER`, () => {
      const [read, write, clone] = arch === 'x64' ? [0, 1, 56] : [63, 64, 220]
      assert.equal(verdict(read), 'allow')
      assert.equal(verdict(write), 'allow')
      // fork/threads: CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD …
      assert.equal(verdict(clone, 0x003d0f00), 'allow')
      assert.equal(verdict(clone, 0x10000000 | 0x11), 'EPERM')
      assert.equal(verdict(435), 'ENOSYS', 'clone3 falls back to clone')
    })

    test(`${arch}: refuses a set-user-ID or set-group-ID mode, allows any other`, () => {
      const names = ['fchmod', 'fchmodat', 'fchmodat2', 'openat', 'mknodat']
      if (arch === 'x64') names.push('chmod', 'open', 'creat', 'mknod')
      for (const name of names) {
        const call = modeCheckedCall(arch, name)!
        const withMode = (mode: number) => {
          const args = [0, 0, 0, 0, 0, 0]
          args[call.arg] = mode
          return seccompVerdict(program, { arch: auditArch(arch), nr: call.nr, args })
        }
        assert.equal(withMode(0o4755), 'EPERM', `${name} 4755`)
        assert.equal(withMode(0o2755), 'EPERM', `${name} 2755`)
        assert.equal(withMode(0o755), 'allow', `${name} 755`)
        assert.equal(withMode(0o1777), 'allow', `${name} 1777 (sticky)`)
      }
      assert.equal(verdict(437), 'ENOSYS', 'openat2 falls back to openat')
    })

    test(`${arch}: refuses every call of another ABI`, () => {
      assert.equal(seccompVerdict(program, { arch: 0x40000003, nr: 0 }), 'EPERM')
    })
  }

  test('x64: refuses x32 system calls', () => {
    const program = seccompProgram('x64')
    assert.equal(seccompVerdict(program, { arch: auditArch('x64'), nr: 0x40000000 }), 'EPERM')
  })
})
