/**
 * Root-owned grants stay writable when Barbican runs as root (ADR 096). The server keeps its own
 * unprivileged uid (the process limit, signals and everything else of ADR 030 hold), and each
 * granted folder owned by root is mounted *idmapped* for it: inside, root's files appear as the
 * server's own and what it creates is root's on the host. Nothing on disk changes owner; the
 * mapping lives in the mount, which exists only in the sandbox's mount namespace.
 *
 * bubblewrap 0.8 cannot make idmapped mounts, and Node cannot make system calls, so a short Perl
 * program (Perl is part of every Debian and Ubuntu base system) runs first, as root: it enters a
 * private mount namespace, makes a user namespace whose map sends uid and gid 0 to the sandbox
 * uid, clones each grant's mount (open_tree), sets the map on it (mount_setattr, with nosuid and
 * nodev), moves the clone to a staging place of its own (move_mount), and executes bwrap, which
 * binds the staged clone at the grant's place. The grant's own path is left as it was, so what
 * bwrap binds from *inside* a granted folder (the state directory in a project's `.barbican/`,
 * a package in the project) is reached through the plain mount: through the idmapped one, a
 * folder owned by the sandbox uid shows an unmapped owner, which even root may not cross.
 * Where a step fails (an old kernel, a file system without idmap support), it says so on stderr
 * and bind-mounts the grant itself onto its staging place: the grant is then bound as before.
 * Without a private mount namespace it stops the launch, rather than mount on the host.
 */
import { closeSync, lstatSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { findExecutable } from './executables.ts'

/** System call numbers the program needs, by Node's name for the architecture. */
const SYSCALLS: Readonly<Record<string, readonly number[]>> = {
  // unshare, mount, open_tree, move_mount, mount_setattr
  x64: [272, 165, 428, 429, 442],
  arm64: [97, 40, 428, 429, 442],
}

/**
 * `perl -e IDMAP_SCRIPT -- UID N1 N2 N3 N4 N5 GRANT STAGE … -- COMMAND…`. Constants: CLONE_NEWNS
 * 0x20000, CLONE_NEWUSER 0x10000000, MS_REC|MS_PRIVATE 0x44000, OPEN_TREE_CLONE|CLOEXEC 0x80001,
 * AT_EMPTY_PATH 0x1000, MOUNT_ATTR_IDMAP|NOSUID|NODEV 0x100006, MOVE_MOUNT_F_EMPTY_PATH 4.
 */
export const IDMAP_SCRIPT = `
use strict; use warnings; use POSIX ();
my ($uid, $unshare, $mount, $open_tree, $move_mount, $setattr) = splice(@ARGV, 0, 6);
my @pairs; push @pairs, [shift @ARGV, shift @ARGV] while @ARGV && $ARGV[0] ne '--'; shift @ARGV;
sub warn_ { print STDERR "barbican: root-owned grants are bound without an idmap ($_[0]); the server may not write them\\n" }
my ($none, $root, $empty) = ('none', '/', '');
syscall($unshare, 0x20000) == 0 or die "barbican: cannot make a private mount namespace for the idmapped grants: $!\\n";
syscall($mount, $none, $root, 0, 0x44000, 0) == 0 or die "barbican: cannot make the mounts private for the idmapped grants: $!\\n";
my %staged;
sub run {
  pipe(my $r, my $w) or return warn_("pipe: $!");
  my $pid = fork() // return warn_("fork: $!");
  if ($pid == 0) { close $r; syscall($unshare, 0x10000000); close $w; sleep 30; POSIX::_exit(0) }
  close $w; my $ready = <$r>; close $r;
  my $ns;
  for my $f ('uid_map', 'gid_map') {
    my $m;
    my $done = open($m, '>', "/proc/$pid/$f") && print($m "0 $uid 1\\n") && close($m);
    if (!$done) { kill 'KILL', $pid; waitpid $pid, 0; return warn_("$f: $!") }
  }
  open($ns, '<', "/proc/$pid/ns/user") or do { kill 'KILL', $pid; waitpid $pid, 0; return warn_("userns: $!") };
  kill 'KILL', $pid; waitpid $pid, 0;
  for my $pair (@pairs) {
    my ($grant, $stage) = ("$pair->[0]", "$pair->[1]");
    my $fd = syscall($open_tree, -100, $grant, 0x80001);
    if ($fd < 0) { warn_("open_tree $grant: $!"); next }
    my $attr = pack('QQQQ', 0x100006, 0, 0, fileno($ns));
    if (syscall($setattr, $fd, $empty, 0x1000, $attr, length $attr) != 0) { warn_("mount_setattr $grant: $!"); POSIX::close($fd); next }
    if (syscall($move_mount, $fd, $empty, -100, $stage, 4) == 0) { $staged{$stage} = 1 } else { warn_("move_mount $grant: $!") }
    POSIX::close($fd);
  }
}
run();
# MS_BIND|MS_REC: a grant the idmap missed is bound plainly onto its staging place.
for my $pair (@pairs) {
  next if $staged{$pair->[1]};
  syscall($mount, "$pair->[0]", "$pair->[1]", $none, 0x5000, 0) == 0 or die "barbican: cannot stage $pair->[0]: $!\\n";
}
exec { $ARGV[0] } @ARGV or die "barbican: cannot run $ARGV[0]: $!\\n";
`

/** The read-write grants that need an idmap: folders and files owned by root. */
export function rootOwned(paths: readonly string[]): string[] {
  return paths.filter((path) => {
    try {
      return lstatSync(path).uid === 0
    } catch {
      return false
    }
  })
}

/**
 * Staging places for the idmapped clones of `grants`, made (root's, 0700) under `stagingDir`:
 * an empty folder for a folder, an empty file for a file. The map from each grant to the place
 * bwrap binds it from.
 */
export function stageGrants(stagingDir: string, grants: readonly string[]): Map<string, string> {
  rmSync(stagingDir, { recursive: true, force: true })
  const stages = new Map<string, string>()
  if (grants.length === 0) return stages
  mkdirSync(stagingDir, { recursive: true, mode: 0o700 })
  grants.forEach((grant, i) => {
    const stage = join(stagingDir, String(i))
    if (statSync(grant).isDirectory()) mkdirSync(stage, { mode: 0o700 })
    else closeSync(openSync(stage, 'w', 0o600))
    stages.set(grant, stage)
  })
  return stages
}

/**
 * The command line that runs `command args` after idmapping each grant of `stages` onto its
 * staging place for `uid`, or undefined when there is nothing to map or the host cannot (no
 * Perl, an architecture not described).
 */
export function idmapPrefix(
  uid: number,
  stages: ReadonlyMap<string, string>,
): string[] | undefined {
  const numbers = SYSCALLS[process.arch]
  const perl = findExecutable('perl')
  if (stages.size === 0 || numbers === undefined || perl === undefined) return undefined
  const pairs = [...stages].flat()
  return [perl, '-e', IDMAP_SCRIPT, '--', String(uid), ...numbers.map(String), ...pairs, '--']
}
