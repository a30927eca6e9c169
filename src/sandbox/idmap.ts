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
 * nodev), puts it back over the grant (move_mount), and executes bwrap, which binds the grant
 * as usual and so binds the idmapped mount. Where a step fails (an old kernel, a file system
 * without idmap support), it says so on stderr and the grant is bound as before.
 */
import { lstatSync } from 'node:fs'
import { findExecutable } from './executables.ts'

/** System call numbers the program needs, by Node's name for the architecture. */
const SYSCALLS: Readonly<Record<string, readonly number[]>> = {
  // unshare, mount, open_tree, move_mount, mount_setattr
  x64: [272, 165, 428, 429, 442],
  arm64: [97, 40, 428, 429, 442],
}

/**
 * `perl -e IDMAP_SCRIPT -- UID N1 N2 N3 N4 N5 GRANT… -- COMMAND…`. Constants: CLONE_NEWNS
 * 0x20000, CLONE_NEWUSER 0x10000000, MS_REC|MS_PRIVATE 0x44000, OPEN_TREE_CLONE|CLOEXEC 0x80001,
 * AT_EMPTY_PATH 0x1000, MOUNT_ATTR_IDMAP|NOSUID|NODEV 0x100006, MOVE_MOUNT_F_EMPTY_PATH 4.
 */
export const IDMAP_SCRIPT = `
use strict; use warnings; use POSIX ();
my ($uid, $unshare, $mount, $open_tree, $move_mount, $setattr) = splice(@ARGV, 0, 6);
my @grants; push @grants, shift @ARGV while @ARGV && $ARGV[0] ne '--'; shift @ARGV;
sub warn_ { print STDERR "barbican: root-owned grants are bound without an idmap ($_[0]); the server may not write them\\n" }
sub run {
  my ($none, $root, $empty) = ('none', '/', '');
  syscall($unshare, 0x20000) == 0 or return warn_("unshare: $!");
  syscall($mount, $none, $root, 0, 0x44000, 0) == 0 or return warn_("mount: $!");
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
  for my $grant (@grants) {
    my $path = "$grant";
    my $fd = syscall($open_tree, -100, $path, 0x80001);
    if ($fd < 0) { warn_("open_tree $grant: $!"); next }
    my $attr = pack('QQQQ', 0x100006, 0, 0, fileno($ns));
    if (syscall($setattr, $fd, $empty, 0x1000, $attr, length $attr) != 0) { warn_("mount_setattr $grant: $!"); POSIX::close($fd); next }
    syscall($move_mount, $fd, $empty, -100, $path, 4) == 0 or warn_("move_mount $grant: $!");
    POSIX::close($fd);
  }
}
run();
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
 * The command line that runs `command args` after idmapping `grants` for `uid`, or undefined
 * when there is nothing to map or the host cannot (no Perl, an architecture not described).
 */
export function idmapPrefix(uid: number, grants: readonly string[]): string[] | undefined {
  const numbers = SYSCALLS[process.arch]
  const perl = findExecutable('perl')
  if (grants.length === 0 || numbers === undefined || perl === undefined) return undefined
  return [perl, '-e', IDMAP_SCRIPT, '--', String(uid), ...numbers.map(String), ...grants, '--']
}
