internal import CLinux

/// pidfds (pidfd_open(2), pidfd_send_signal(2)) and O_PATH, which Swift cannot reach directly
/// (`syscall` is variadic; O_PATH is declared only under _GNU_SOURCE): the broker's and the
/// keeper's caller identification, so that neither imports a C module for them.
package enum ProcessDescriptor {
    /// O_PATH: a directory opened only to be named by the *at calls.
    package static var openPathFlag: Int32 { Int32(TC_O_PATH) }

    /// A pidfd for `pid`, or -1 with errno.
    package static func open(pid: Int32) -> Int32 { tc_pidfd_open(pid) }

    /// Whether the pidfd's process has not been reaped yet (signal 0 through the pidfd).
    package static func isAlive(_ pidfd: Int32) -> Bool { tc_pidfd_alive(pidfd) == 0 }
}
