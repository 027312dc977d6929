#ifndef TOKENCACHE_CLINUX_SHIM_H
#define TOKENCACHE_CLINUX_SHIM_H
// The glibc calls Swift cannot make directly: declared only under _GNU_SOURCE (which the Glibc
// module is built without), variadic, or not exported by the Glibc module.
#include <malloc.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

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
#endif
