#ifndef TOKENCACHE_CLIBSECRET_SHIM_H
#define TOKENCACHE_CLIBSECRET_SHIM_H
// GLib and GIO, which are linked: the Secret Service client makes plain GDBus calls
// (SecretServiceClient), prompts included. libsecret is neither linked nor loaded; libgcrypt,
// for the encrypted transfer, is loaded at run time (CGcrypt/transfer.h).
#include <gio/gio.h>
#include <sys/syscall.h>
#include <unistd.h>

// pidfds for the broker's caller identification (syscall is variadic, which Swift cannot call).
/// O_PATH (declared only under _GNU_SOURCE): the value on x86-64, arm64 and the other generic-ABI architectures.
enum { TC_O_PATH = 010000000 };
/// pidfd_open(2): a pidfd for `pid`, or -1 with errno.
static inline int tc_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
/// pidfd_send_signal(2) with signal 0: 0 while the pidfd's process has not been reaped, -1 with errno after.
static inline int tc_pidfd_alive(int pidfd) { return (int)syscall(SYS_pidfd_send_signal, pidfd, 0, (void *)0, 0); }

#endif
