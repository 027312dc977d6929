internal import CLinux

/// Whether this process may dump core. `tokencache` turns it off first thing (docs/SECURITY.md
/// says what an app embedding the library should do): a crash then writes no core file holding
/// decrypted tokens, and other processes of the same user can no longer attach a debugger or
/// read its memory through /proc. It lasts until the process runs another program.
public enum CoreDumps {
    /// Makes the process non-dumpable (`PR_SET_DUMPABLE` 0). Returns whether it took effect.
    @discardableResult
    public static func disable() -> Bool { tc_set_dumpable(0) == 0 }

    /// Whether the process is non-dumpable, as the kernel reports it (`PR_GET_DUMPABLE` 0).
    public static var areDisabled: Bool { tc_get_dumpable() == 0 }
}
