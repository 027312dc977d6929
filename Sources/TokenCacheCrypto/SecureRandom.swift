internal import CGcrypt
import Glibc

/// Random bytes from the kernel (getrandom, which blocks only until the kernel's generator is
/// seeded, once per boot): for the Secret Service's transfer, which must not load libcrypto.
package enum SecureRandom {
    /// Fills `bytes` from the kernel's random source.
    /// - Returns: nil when every byte was filled, else getrandom's errno.
    package static func fill(_ bytes: inout [UInt8]) -> Int32? {
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, $0.count - filled, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                return errno
            }
            filled += count
        }
        return nil
    }
}
