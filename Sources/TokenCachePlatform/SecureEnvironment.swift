internal import CLinux

/// Environment variables that choose code, files or endpoints, read as `secure_getenv` reads
/// them: ignored when the process runs setuid, setgid or with file capabilities, so another user
/// cannot steer a privileged process. Empty counts as unset.
package enum SecureEnvironment {
    /// The variable's value, or nil when it is unset, empty, or the process is privileged.
    package static func value(_ name: String) -> String? {
        tc_secure_getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }
}
