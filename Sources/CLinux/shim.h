#ifndef TOKENCACHE_CLINUX_SHIM_H
#define TOKENCACHE_CLINUX_SHIM_H
// The glibc calls Swift cannot make directly: declared only under _GNU_SOURCE (which the Glibc
// module is built without), variadic, or not exported by the Glibc module.
#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// pidfds for the broker's and the keeper's caller identification (TokenCachePlatform's ProcessDescriptor).
/// O_PATH (declared only under _GNU_SOURCE): the value on x86-64, arm64 and the other generic-ABI architectures.
enum { TC_O_PATH = 010000000 };
/// pidfd_open(2): a pidfd for `pid`, or -1 with errno.
static inline int tc_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
/// pidfd_getfd(2): a copy (close-on-exec) of descriptor `fd` of the pidfd's process, or -1 with
/// errno (needs ptrace access to it: the keeper's CAP_SYS_PTRACE).
static inline int tc_pidfd_getfd(int pidfd, int fd) { return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0); }

extern char *secure_getenv(const char *name);
/// getenv, but NULL in secure-execution mode (setuid, setgid, file capabilities: AT_SECURE).
static inline const char *tc_secure_getenv(const char *name) { return secure_getenv(name); }

/// prctl is variadic: whether the process may dump core (and be ptrace-attached or have
/// /proc/<pid>/mem read by same-uid processes). Sets 0 or 1; returns prctl's result.
static inline int tc_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL); }
/// 1 (or 2, suid_dumpable) when the process is dumpable, 0 when not, -1 on error.
static inline int tc_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL); }

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
/// Closes every descriptor from `from` up in the spawned child (glibc 2.34+): a browser started
/// for the sign-in inherits none of the app's files and sockets.
static inline int tc_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
/// A pipe whose two ends are close-on-exec from the start (pipe2 is _GNU_SOURCE-only).
extern int pipe2(int fds[2], int flags);
static inline int tc_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

// The kernel keyring (keyutils) through its raw system calls: libkeyutils is not needed, and
// syscall is variadic. Numbers from <sys/syscall.h>; constants from <linux/keyctl.h>.
enum {
    TC_KEY_SPEC_SESSION_KEYRING = -3,
    TC_KEYCTL_SETPERM = 5,
    TC_KEYCTL_UNLINK = 9,
    TC_KEYCTL_SEARCH = 10,
    TC_KEYCTL_READ = 11,
    TC_KEYCTL_SET_TIMEOUT = 15,
    TC_KEYCTL_INVALIDATE = 21,
    /// KEY_POS_ALL: every permission for a process that possesses the key (through its session
    /// keyring), none for the user, group or others otherwise.
    TC_KEY_POS_ALL = 0x3f000000,
};
/// add_key(2): a "user" key in `keyring`; its serial number, or -1 with errno.
static inline long tc_add_key(const char *type, const char *description, const void *payload, size_t length, long keyring) {
    return syscall(SYS_add_key, type, description, payload, length, keyring);
}
/// keyctl(2) with up to four arguments; the result, or -1 with errno.
static inline long tc_keyctl(int operation, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5) {
    return syscall(SYS_keyctl, operation, a2, a3, a4, a5);
}
// NETLINK_SOCK_DIAG: the owner of one TCP socket, looked up by its exact 4-tuple (what `ss`
// does), instead of reading all of /proc/net/tcp for each connection (#57 item 6).
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>

/// A NETLINK_SOCK_DIAG socket (close-on-exec); -1 with errno when netlink is unavailable.
static inline int tc_sock_diag_open(void) {
    return socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
}

/// The uid owning the ESTABLISHED TCP socket whose local end is `source`:`source_port` and whose
/// remote end is `destination`:`destination_port` (addresses in network order: 4 bytes for
/// AF_INET, 16 for AF_INET6; ports in host order). 0 and `*uid` set when found; -ENOENT when
/// no such socket; another negative errno when the query failed. One query at a time per `fd`;
/// `sequence` tells its answer from a late one to an earlier query.
static inline int tc_sock_diag_tcp_uid(int fd, unsigned int sequence, int family, const unsigned char *source, unsigned short source_port,
                                       const unsigned char *destination, unsigned short destination_port, unsigned int *uid) {
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;  // one socket by its id, not a dump
    message.header.nlmsg_seq = sequence;
    message.request.sdiag_family = (unsigned char)family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = 1u << 1;  // TCP_ESTABLISHED
    message.request.id.idiag_sport = htons(source_port);
    message.request.id.idiag_dport = htons(destination_port);
    size_t length = family == AF_INET6 ? 16 : 4;
    memcpy(message.request.id.idiag_src, source, length);
    memcpy(message.request.id.idiag_dst, destination, length);
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    ssize_t sent;
    do { sent = sendto(fd, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel); } while (sent < 0 && errno == EINTR);
    if (sent < 0) return -errno;
    _Alignas(struct nlmsghdr) unsigned char buffer[8192];
    for (;;) {
        ssize_t received;
        do { received = recv(fd, buffer, sizeof buffer, 0); } while (received < 0 && errno == EINTR);
        if (received < 0) return -errno;
        int remaining = (int)received;
        for (struct nlmsghdr *reply = (struct nlmsghdr *)buffer; NLMSG_OK(reply, remaining); reply = NLMSG_NEXT(reply, remaining)) {
            if (reply->nlmsg_seq != sequence) continue;  // an answer to an earlier, abandoned query
            if (reply->nlmsg_type == NLMSG_ERROR) {
                if (reply->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) return -EPROTO;
                const struct nlmsgerr *failure = (const struct nlmsgerr *)NLMSG_DATA(reply);
                return failure->error < 0 ? failure->error : -ENOENT;
            }
            if (reply->nlmsg_type == NLMSG_DONE) return -ENOENT;
            if (reply->nlmsg_type == SOCK_DIAG_BY_FAMILY && reply->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
                const struct inet_diag_msg *found = (const struct inet_diag_msg *)NLMSG_DATA(reply);
                // An exact lookup ignores idiag_states: the kernel may answer a TIME_WAIT or
                // SYN_RECV minisocket (uid 0) or a listener on the port. Only this connection counts.
                if (found->idiag_state != 1 /* TCP_ESTABLISHED */
                    || found->id.idiag_sport != htons(source_port) || found->id.idiag_dport != htons(destination_port)
                    || memcmp(found->id.idiag_src, source, length) != 0 || memcmp(found->id.idiag_dst, destination, length) != 0) {
                    return -ENOENT;
                }
                *uid = found->idiag_uid;
                return 0;
            }
        }
    }
}
#endif
