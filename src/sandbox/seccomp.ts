/**
 * The seccomp filter of a bubblewrap sandbox (docs/sandbox.md, ADR 044): a classic-BPF program,
 * produced here from a short reviewed table rather than by libseccomp (no native dependency, no
 * build step), handed to `bwrap --seccomp FD`. It denies, with EPERM, the system calls an MCP
 * server has no business making and that widen the kernel's attack surface or undo the
 * sandbox: tracing other processes, mounting, kernel modules and kexec, BPF, perf, keyrings,
 * new namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3, whose flags a filter
 * cannot read, answers ENOSYS so libc falls back to clone), and giving a file the set-user-ID or
 * set-group-ID bit (ADR 096: a file a server makes in a root-owned grant is root's on the host, so
 * a set-user-ID one would be a root program there; openat2, whose mode a filter cannot read,
 * answers ENOSYS). Everything else is allowed. Only
 * x86_64 and aarch64 are described; a system call made through another ABI (i386 or x32 on an
 * x86_64 kernel) is refused whole.
 */

/** The system calls refused, with their numbers on x86_64 and aarch64. */
const DENIED: Readonly<Record<string, readonly [x64: number, arm64: number]>> = {
  ptrace: [101, 117],
  process_vm_readv: [310, 270],
  process_vm_writev: [311, 271],
  mount: [165, 40],
  umount2: [166, 39],
  pivot_root: [155, 41],
  open_tree: [428, 428],
  move_mount: [429, 429],
  fsopen: [430, 430],
  fsconfig: [431, 431],
  fsmount: [432, 432],
  fspick: [433, 433],
  open_by_handle_at: [304, 265],
  swapon: [167, 224],
  swapoff: [168, 225],
  reboot: [169, 142],
  init_module: [175, 105],
  finit_module: [313, 273],
  delete_module: [176, 106],
  kexec_load: [246, 104],
  kexec_file_load: [320, 294],
  bpf: [321, 280],
  perf_event_open: [298, 241],
  userfaultfd: [323, 282],
  add_key: [248, 217],
  request_key: [249, 218],
  keyctl: [250, 219],
  unshare: [272, 97],
  setns: [308, 268],
}

/**
 * System calls refused only when their mode argument (at the index given) asks for the
 * set-user-ID or set-group-ID bit; -1 where the architecture lacks the call.
 */
const MODE_CHECKED: Readonly<Record<string, readonly [x64: number, arm64: number, arg: number]>> = {
  chmod: [90, -1, 1],
  fchmod: [91, 52, 1],
  fchmodat: [268, 53, 2],
  fchmodat2: [452, 452, 2],
  open: [2, -1, 2],
  creat: [85, -1, 1],
  openat: [257, 56, 3],
  mknod: [133, -1, 1],
  mknodat: [259, 33, 2],
}
/** S_ISUID | S_ISGID. */
const SET_ID_BITS = 0o6000

/** Names of the refused system calls, for docs and `barbican check`. */
export const SECCOMP_DENIED: readonly string[] = [
  ...Object.keys(DENIED),
  'clone (CLONE_NEW*)',
  ...Object.keys(MODE_CHECKED).map((name) => `${name} (set-user/group-ID mode)`),
]

const ARCH = {
  x64: { audit: 0xc000003e, clone: 56, clone3: 435, openat2: 437, column: 0 },
  arm64: { audit: 0xc00000b7, clone: 220, clone3: 435, openat2: 437, column: 1 },
} as const

export type SeccompArch = keyof typeof ARCH

// Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS = 0x20
const JEQ_K = 0x15
const JGE_K = 0x35
const JSET_K = 0x45
const RET_K = 0x06
const RET_ALLOW = 0x7fff0000
const RET_ERRNO = 0x00050000
const EPERM = 1
const ENOSYS = 38
/** x32 system calls carry this bit in their number (x86_64 kernels). */
const X32_BIT = 0x40000000
/** CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET. */
const CLONE_NEW_ANY =
  0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
// struct seccomp_data: nr at 0, arch at 4, instruction pointer at 8, args from 16.
const NR = 0
const AUDIT_ARCH = 4
const ARG0 = 16

/** The architecture of this process, if the filter knows it. */
export function seccompArch(arch: string = process.arch): SeccompArch | undefined {
  return arch === 'x64' ? 'x64' : arch === 'arm64' ? 'arm64' : undefined
}

interface Insn {
  readonly code: number
  readonly k: number
  /** Jump targets by label, resolved to relative offsets when encoded. */
  readonly jt?: string
  readonly jf?: string
  readonly label?: string
}

/** The filter for `arch` as bytes: struct sock_filter[], in the machine's (little) endianness. */
export function seccompProgram(arch: SeccompArch): Buffer {
  const a = ARCH[arch]
  const modeChecks = Object.values(MODE_CHECKED)
    .filter((entry) => entry[a.column]! >= 0)
    .map((entry) => [entry[a.column]!, entry[2]] as const)
  const program: Insn[] = [
    { code: LD_W_ABS, k: AUDIT_ARCH },
    { code: JEQ_K, k: a.audit, jf: 'deny' },
    { code: LD_W_ABS, k: NR },
    ...(arch === 'x64' ? [{ code: JGE_K, k: X32_BIT, jt: 'deny' }] : []),
    ...Object.values(DENIED).map((numbers) => ({
      code: JEQ_K,
      k: numbers[a.column]!,
      jt: 'deny',
    })),
    { code: JEQ_K, k: a.clone3, jt: 'nosys' },
    { code: JEQ_K, k: a.openat2, jt: 'nosys' },
    ...modeChecks.flatMap(([nr], i) => [{ code: JEQ_K, k: nr, jt: `mode${i}` }]),
    { code: JEQ_K, k: a.clone, jf: 'allow' },
    { code: LD_W_ABS, k: ARG0 },
    { code: JSET_K, k: CLONE_NEW_ANY, jt: 'deny', jf: 'allow' },
    // The mode's low word (args are 8 bytes, little-endian): a set-ID bit is refused.
    ...modeChecks.flatMap(([, arg], i) => [
      { code: LD_W_ABS, k: ARG0 + 8 * arg, label: `mode${i}` },
      { code: JSET_K, k: SET_ID_BITS, jt: 'deny', jf: 'allow' },
    ]),
    { code: RET_K, k: RET_ALLOW, label: 'allow' },
    { code: RET_K, k: RET_ERRNO | EPERM, label: 'deny' },
    { code: RET_K, k: RET_ERRNO | ENOSYS, label: 'nosys' },
  ]
  const at = new Map(program.flatMap((insn, i) => (insn.label ? [[insn.label, i] as const] : [])))
  const offset = (from: number, label: string | undefined) => {
    if (label === undefined) return 0
    const distance = at.get(label)! - from - 1
    if (distance < 0 || distance > 255) throw new Error(`seccomp: jump to ${label} out of range`)
    return distance
  }
  const bytes = Buffer.alloc(program.length * 8)
  program.forEach((insn, i) => {
    bytes.writeUInt16LE(insn.code, i * 8)
    bytes.writeUInt8(offset(i, insn.jt), i * 8 + 2)
    bytes.writeUInt8(offset(i, insn.jf), i * 8 + 3)
    bytes.writeUInt32LE(insn.k >>> 0, i * 8 + 4)
  })
  return bytes
}

/** What the filter answers for one system call: runs the program as the kernel would. */
export function seccompVerdict(
  program: Buffer,
  call: {
    readonly arch: number
    readonly nr: number
    readonly arg0?: number
    /** Low words of all six arguments (`arg0` wins for the first). */
    readonly args?: readonly number[]
  },
): 'allow' | 'EPERM' | 'ENOSYS' | number {
  const arg = (i: number) =>
    i === 0 && call.arg0 !== undefined ? call.arg0 : (call.args?.[i] ?? 0)
  let acc = 0
  for (let pc = 0; pc < program.length / 8; ) {
    const code = program.readUInt16LE(pc * 8)
    const jt = program.readUInt8(pc * 8 + 2)
    const jf = program.readUInt8(pc * 8 + 3)
    const k = program.readUInt32LE(pc * 8 + 4)
    if (code === LD_W_ABS) {
      acc =
        k === NR
          ? call.nr
          : k === AUDIT_ARCH
            ? call.arch
            : k >= ARG0 && (k - ARG0) % 8 === 0
              ? arg((k - ARG0) / 8)
              : 0
      pc++
    } else if (code === RET_K) {
      if (k === RET_ALLOW) return 'allow'
      if (k === (RET_ERRNO | EPERM)) return 'EPERM'
      if (k === (RET_ERRNO | ENOSYS)) return 'ENOSYS'
      return k
    } else {
      const taken = code === JEQ_K ? acc === k : code === JGE_K ? acc >>> 0 >= k : (acc & k) !== 0
      pc += 1 + (taken ? jt : jf)
    }
  }
  throw new Error('seccomp: the program fell off its end')
}

/** The audit-arch value of `arch`, for tests. */
export function auditArch(arch: SeccompArch): number {
  return ARCH[arch].audit
}

/** The number and mode argument of a mode-checked call on `arch`, for tests. */
export function modeCheckedCall(
  arch: SeccompArch,
  name: string,
): { readonly nr: number; readonly arg: number } | undefined {
  const entry = MODE_CHECKED[name]
  const nr = entry?.[ARCH[arch].column]
  return entry === undefined || nr === undefined || nr < 0 ? undefined : { nr, arg: entry[2] }
}

/** The number of a refused system call on `arch`, for tests. */
export function deniedNumber(arch: SeccompArch, name: string): number | undefined {
  return DENIED[name]?.[ARCH[arch].column]
}
