// CKeepAliveLinux: the few Linux calls the daemon and its engine need that Swift's Glibc module hides
// behind _GNU_SOURCE (which a Swift module cannot set per header): accept4, pipe2, struct ucred,
// posix_spawn's POSIX_SPAWN_SETSID, pthread_setname_np and memfd_create; and the headers it leaves out
// (signalfd, timerfd, eventfd, malloc). The .c file defines _GNU_SOURCE and exports them with
// plain types, so nothing in Swift hard-codes a flag value or a structure layout.
#ifndef CKEEPALIVE_LINUX_H
#define CKEEPALIVE_LINUX_H

#include <sys/types.h>
// signalfd and timerfd, which the daemon's main loop polls: plain declarations Swift's Glibc
// module does not include.
#include <sys/signalfd.h>
#include <sys/timerfd.h>
// The eventfd that rings a playback thread's doorbell.
#include <sys/eventfd.h>
// mallopt (one malloc arena for the daemon).
#include <malloc.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Names the calling thread (visible in `top -H` and /proc/PID/task/TID/comm); Linux keeps its
/// first 15 bytes.
void csystem_name_current_thread(const char *name);

/// Whether the peer of connected stream socket `fd` has hung up or shut down its writing side
/// (poll's POLLRDHUP, a _GNU_SOURCE flag), without reading anything: 1 yes, 0 no.
int csystem_peer_hung_up(int fd);

/// A memfd (close-on-exec) whose seals may be added: a carried player's shared memory, sealed
/// against shrinking and growing before it is handed over (a player that truncated it would
/// make keepalived's reads fault). Returns the descriptor, or -1 with errno set.
int csystem_memfd_sealable(const char *name);

/// Seals memfd `fd` at its size (F_SEAL_SHRINK, F_SEAL_GROW, then F_SEAL_SEAL). 0, or -1 with errno.
int csystem_memfd_seal_size(int fd);

/// Sends `length` bytes on stream socket `fd` with the `count` descriptors in `fds` attached
/// (SCM_RIGHTS), without blocking and without SIGPIPE. Returns the bytes sent, or -1 with errno.
long csystem_send_with_descriptors(int fd, const void *bytes, unsigned long length, const int *fds, int count);

/// Accepts a connection on `fd` with the new descriptor already non-blocking and close-on-exec
/// (accept4). Returns the descriptor, or -1 with errno set.
int csystem_accept_nonblocking(int fd);

/// Creates a pipe whose two ends are non-blocking and close-on-exec (pipe2). Returns 0, or -1
/// with errno set.
int csystem_pipe_nonblocking(int fds[2]);

/// Creates a pipe whose two ends are close-on-exec from the start (pipe2): no child started by
/// another thread meanwhile inherits them. Both ends block (a child's output stays a plain
/// blocking pipe). Returns 0, or -1 with errno set.
int csystem_pipe_cloexec(int fds[2]);

/// The process at the other end of a connected Unix socket (SO_PEERCRED).
typedef struct csystem_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
} csystem_peer;

/// Fills `peer` for the Unix socket `fd`. Returns 0, or -1 with errno set.
int csystem_peer_credentials(int fd, csystem_peer *peer);

/// Whether the process at the other end of the Unix socket `fd` had `group` as its group or
/// one of its supplementary groups when it connected (SO_PEERCRED, SO_PEERGROUPS): 1 or 0, or
/// -1 with errno set.
int csystem_peer_in_group(int fd, gid_t group);

/// An anonymous file in memory, close-on-exec (memfd_create): what a rendered loop maps again
/// and again so that a long loop costs one tile of memory. Returns it, or -1 with errno set
/// (a seccomp filter may refuse it: the caller then allocates plainly).
int csystem_memfd(const char *name);

/// A descriptor that polls readable once process `pid` has exited (pidfd_open, Linux 5.3;
/// glibc 2.36 has no wrapper). Returns it, or -1 with errno set.
int csystem_pidfd_open(pid_t pid);

/// How `csystem_spawn` sets up the child. A NULL path leaves that descriptor inherited.
typedef struct csystem_spawn_options {
    /// Opened read-only as descriptor 0.
    const char *stdin_path;
    /// Opened write-only (created with mode 0600) as descriptor 1.
    const char *stdout_path;
    /// Opened like stdout as descriptor 2; ignored when `stderr_to_stdout` is set.
    const char *stderr_path;
    /// Descriptor 2 is a duplicate of descriptor 1 (one log for both).
    int stderr_to_stdout;
    /// Output files are appended to rather than truncated.
    int append;
    /// The child leads a session of its own (POSIX_SPAWN_SETSID): no controlling terminal, and
    /// out of reach of the signals sent to its parent's process group.
    int new_session;
    /// The child leads a process group of its own (ignored with `new_session`): what it starts
    /// can be signalled with it.
    int new_process_group;
    /// When 0 or more: descriptors 1 and 2 are duplicates of it (a pipe the parent reads), over
    /// the paths above.
    int output_fd;
    /// `path` is looked up in PATH when it has no slash (posix_spawnp).
    int search_path;
} csystem_spawn_options;

/// posix_spawn with the setup every child of keepalived (and of its tests) gets: the descriptors
/// `options` names, no blocked signal and every signal at its default disposition, whatever the
/// parent had. Returns 0 and the child's pid, or an errno value.
int csystem_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                  const csystem_spawn_options *options);

#ifdef __cplusplus
}
#endif

#endif
