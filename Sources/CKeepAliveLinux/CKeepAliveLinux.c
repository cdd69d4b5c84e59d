#define _GNU_SOURCE
#include "CKeepAliveLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

void csystem_name_current_thread(const char *name) {
    pthread_setname_np(pthread_self(), name);
}

int csystem_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int csystem_pipe_nonblocking(int fds[2]) {
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
}

int csystem_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int csystem_peer_credentials(int fd, csystem_peer *peer) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    peer->pid = credentials.pid;
    peer->uid = credentials.uid;
    peer->gid = credentials.gid;
    return 0;
}

int csystem_peer_in_group(int fd, gid_t group) {
    csystem_peer peer;
    if (csystem_peer_credentials(fd, &peer) != 0) return -1;
    if (peer.gid == group) return 1;
    // NGROUPS_MAX is 65536: ask for the size first rather than guess it.
    socklen_t length = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, NULL, &length) != 0 && errno != ERANGE) return -1;
    if (length == 0) return 0;
    gid_t *groups = malloc(length);
    if (groups == NULL) return -1;
    int found = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &length) != 0) {
        free(groups);
        return -1;
    }
    for (size_t index = 0; index < length / sizeof(gid_t); index++) {
        if (groups[index] == group) found = 1;
    }
    free(groups);
    return found;
}

int csystem_memfd(const char *name) {
    return memfd_create(name, MFD_CLOEXEC);
}

int csystem_memfd_sealable(const char *name) {
    return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}

int csystem_memfd_seal_size(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

long csystem_send_with_descriptors(int fd, const void *bytes, unsigned long length, const int *fds, int count) {
    if (count < 0 || count > 4) {
        errno = EINVAL;
        return -1;
    }
    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(4 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1};
    if (count > 0) {
        message.msg_control = control.space;
        message.msg_controllen = CMSG_SPACE((size_t)count * sizeof(int));
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN((size_t)count * sizeof(int));
        memcpy(CMSG_DATA(header), fds, (size_t)count * sizeof(int));
    }
    ssize_t sent;
    do sent = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (sent < 0 && errno == EINTR);
    return (long)sent;
}

int csystem_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int csystem_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                  const csystem_spawn_options *options) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) return result;
    result = posix_spawnattr_init(&attributes);
    if (result != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return result;
    }
    int output = O_WRONLY | O_CREAT | (options->append ? O_APPEND : O_TRUNC);
    if (options->stdin_path) result = posix_spawn_file_actions_addopen(&actions, 0, options->stdin_path, O_RDONLY, 0);
    if (result == 0 && options->stdout_path)
        result = posix_spawn_file_actions_addopen(&actions, 1, options->stdout_path, output, 0600);
    if (result == 0 && options->stderr_to_stdout)
        result = posix_spawn_file_actions_adddup2(&actions, 1, 2);
    else if (result == 0 && options->stderr_path)
        result = posix_spawn_file_actions_addopen(&actions, 2, options->stderr_path, output, 0600);
    if (result == 0 && options->output_fd >= 0) result = posix_spawn_file_actions_adddup2(&actions, options->output_fd, 1);
    if (result == 0 && options->output_fd >= 0) result = posix_spawn_file_actions_adddup2(&actions, options->output_fd, 2);

    // The parent may block signals (a test runner, a service manager's thread) or ignore some;
    // a child starts clean either way.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (options->new_session ? POSIX_SPAWN_SETSID : 0) |
                  (options->new_process_group && !options->new_session ? POSIX_SPAWN_SETPGROUP : 0);
    if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all);
    if (result == 0) result = posix_spawnattr_setflags(&attributes, flags);
    if (result == 0) result = posix_spawnattr_setpgroup(&attributes, 0);
    if (result == 0) result = options->search_path ? posix_spawnp(pid, path, &actions, &attributes, argv, envp)
                                                   : posix_spawn(pid, path, &actions, &attributes, argv, envp);

    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

int csystem_peer_hung_up(int fd) {
    struct pollfd entry = { .fd = fd, .events = POLLRDHUP, .revents = 0 };
    return poll(&entry, 1, 0) > 0 && (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}
