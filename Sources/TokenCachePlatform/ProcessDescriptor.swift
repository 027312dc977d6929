#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
internal import CLinux

/// pidfds (pidfd_open(2), polled for their process's exit) and O_PATH, which Swift cannot reach directly
/// (`syscall` is variadic; O_PATH is declared only under _GNU_SOURCE): the broker's and the
/// keeper's caller identification, so that neither imports a C module for them.
package enum ProcessDescriptor {
    /// O_PATH: a directory opened only to be named by the *at calls.
    package static var openPathFlag: Int32 { Int32(TC_O_PATH) }

    /// A pidfd for `pid`, or -1 with errno.
    package static func open(pid: Int32) -> Int32 { tc_pidfd_open(pid) }

    /// A copy of descriptor `fd` of the pidfd's process (close-on-exec), or -1 with errno: needs
    /// ptrace access to that process.
    package static func copy(_ fd: Int32, of pidfd: Int32) -> Int32 { tc_pidfd_getfd(pidfd, fd) }

    /// Whether the pidfd's process has not exited: a pidfd polls readable once it has. Polling
    /// needs no right over the process; signal 0 through the pidfd did, so the keeper, bounded to
    /// two capabilities without CAP_KILL, took every other user's process for gone.
    package static func isAlive(_ pidfd: Int32) -> Bool {
        guard pidfd >= 0 else { return false }  // poll skips a negative descriptor
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&entry, 1, 0)
            if ready < 0 && errno == EINTR { continue }
            return ready == 0
        }
    }
}
