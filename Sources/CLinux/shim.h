#ifndef TOKENCACHE_CLINUX_SHIM_H
#define TOKENCACHE_CLINUX_SHIM_H
// The glibc calls Swift cannot make directly: declared only under _GNU_SOURCE (which the Glibc
// module is built without), variadic, or not exported by the Glibc module.
#include <malloc.h>
#include <spawn.h>
#include <sys/prctl.h>

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
#endif
