internal import CLibSecret
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
import FoundationEssentials
import Glibc

/// The Secret Service's encrypted transfer session (`dh-ietf1024-sha256-aes128-cbc-pkcs7`),
/// opened and used by the backend itself: secrets travel over the bus encrypted with it, both
/// ways (GetSecrets, CreateItem).
///
/// libsecret has the same session, but opens it only inside its own calls and with a private
/// exponent as long as the prime: two 1,024-bit exponentiations on a cold lookup's critical path
/// (about 2.5 ms of its 12). Here the private exponent is 256 random bits: twice the 128-bit
/// strength that the exponent's size can give, more than the 1,024-bit group itself offers
/// (about 80 bits), as RFC 3526 (section 8) and NIST SP 800-56A size it. The daemon's side is
/// the same whoever opens the session. The steps are ``TransferCrypto``'s, on libgcrypt's
/// primitives; key material is wiped when no longer needed.
package final class TransferSession: @unchecked Sendable {
    // @unchecked: immutable after init; GDBus calls are thread-safe.
    package static let algorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    /// Bytes of the private exponent.
    package static let exponentByteCount = 32

    /// The session's object path, sent with every secret.
    package let path: String
    private let gcrypt: Gcrypt
    private let key: UnsafeMutablePointer<UInt8>
    private let bus: GDBusTarget

    private init(path: String, gcrypt: Gcrypt, key: UnsafeMutablePointer<UInt8>, bus: GDBusTarget) {
        self.path = path
        self.gcrypt = gcrypt
        self.key = key
        self.bus = bus
    }

    deinit {
        explicit_bzero(key, TransferCrypto.keyByteCount)
        key.deallocate()
        // The daemon would drop the session when the process disconnects; a long-lived process
        // that makes many backends should not leave one behind per backend. No reply is awaited.
        bus.send("Close", on: path, interface: "org.freedesktop.Secret.Session", arguments: [])
    }

    /// Opens a session: one OpenSession call, the key agreed, and the session's path.
    /// - Throws: `libgcryptMissing` without libgcrypt; the call's typed error; `secretServiceFailure`
    ///   when the service answers with an invalid public value or without this algorithm.
    package static func open(_ bus: GDBusTarget, timeoutMilliseconds: Int32, attempt: Int = 1) throws(TokenCacheError) -> TransferSession {
        let gcrypt = try Gcrypt.shared()
        var exponent = [UInt8](repeating: 0, count: exponentByteCount)
        defer { explicit_bzero(&exponent, exponent.count) }
        var publicKey: [UInt8] = []
        repeat {  // about 1 key pair in 512 is drawn again
            try fillRandom(&exponent)
            exponent[0] |= 0x80  // exactly 256 bits, never a small exponent
            guard let value = TransferCrypto.publicValue(exponent: exponent, gcrypt) else {
                throw failure("could not compute its key pair")
            }
            publicKey = value
        } while TransferCrypto.isMisreadByKWallet(publicKey)
        let input = publicKey.withUnsafeBytes { GVariants.bytes($0) }
        let (peer, path) = try bus.call("OpenSession", on: servicePath, interface: "org.freedesktop.Secret.Service",
                                        arguments: [g_variant_new_string(algorithm), g_variant_new_variant(input)],
                                        replyType: "(vo)", timeoutMilliseconds: timeoutMilliseconds,
                                        action: "open an encrypted session") { reply throws(TokenCacheError) -> ([UInt8], String) in
            let output = g_variant_get_child_value(reply, 0)!, boxed = g_variant_get_variant(output)!
            defer { g_variant_unref(boxed); g_variant_unref(output) }
            let path = g_variant_get_child_value(reply, 1)!
            defer { g_variant_unref(path) }
            guard let peer = GVariants.byteArray(boxed) else { throw failure("answered OpenSession without a public key") }
            return (peer, String(cString: g_variant_get_string(path, nil)))
        }
        let key = UnsafeMutablePointer<UInt8>.allocate(capacity: TransferCrypto.keyByteCount)
        let agreed = TransferCrypto.sessionKey(peer: peer, exponent: exponent, gcrypt, into: key)
        guard agreed == 0 else {
            key.deallocate()
            bus.send("Close", on: path, interface: "org.freedesktop.Secret.Session", arguments: [])
            if agreed == TransferCrypto.leadingZero && attempt < 4 {
                return try open(bus, timeoutMilliseconds: timeoutMilliseconds, attempt: attempt + 1)
            }
            throw failure(agreed == TransferCrypto.invalidPeer ? "sent an invalid public key" : "could not agree a key")
        }
        return TransferSession(path: path, gcrypt: gcrypt, key: key, bus: bus)
    }

    /// A secret as the Secret Service's `(oayays)` Secret struct: this session, a fresh IV, the
    /// PKCS#7-padded plaintext encrypted, and the content type (a floating reference).
    package func secretStruct(_ plaintext: Data, contentType: String) throws(TokenCacheError) -> OpaquePointer {
        var iv = [UInt8](repeating: 0, count: TransferCrypto.blockByteCount)
        try Self.fillRandom(&iv)
        let padding = iv.count - plaintext.count % iv.count
        var buffer: [UInt8] = []  // built in place: no unwiped copy of the plaintext
        buffer.reserveCapacity(plaintext.count + padding)
        buffer.append(contentsOf: plaintext)
        buffer.append(contentsOf: repeatElement(UInt8(padding), count: padding))
        defer { explicit_bzero(&buffer, buffer.count) }
        guard cipher(encrypt: true, iv: iv, &buffer) else { throw Self.failure("could not encrypt a secret") }
        var fields = [g_variant_new_object_path(path), iv.withUnsafeBytes { GVariants.bytes($0) },
                      buffer.withUnsafeBytes { GVariants.bytes($0) }, g_variant_new_string(contentType)]
        return fields.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
    }

    /// The plaintext of a `(oayays)` Secret struct from this session; nil when it is not one
    /// (a bad IV, length or padding: nothing to interpret, never a guess).
    /// The caller wipes the result once read (`explicit_bzero`).
    /// - Throws: `secretServiceFailure` when the secret names another session: it was not
    ///   encrypted for this one, so the answer is not the service's answer to this call.
    package func plaintext(ofSecretStruct secret: OpaquePointer) throws(TokenCacheError) -> [UInt8]? {
        guard String(cString: g_variant_get_type_string(secret)) == "(oayays)" else { return nil }
        let sessionField = g_variant_get_child_value(secret, 0)!
        let session = String(cString: g_variant_get_string(sessionField, nil))
        g_variant_unref(sessionField)
        guard session == path else {
            throw TokenCacheError(.secretServiceFailure,
                                  "The Secret Service answered with a secret of session \(session), not this backend's \(path); it was refused.",
                                  hint: "Another program may be answering for the Secret Service: check `tokencache doctor` and retry")
        }
        let parameters = g_variant_get_child_value(secret, 1)!, value = g_variant_get_child_value(secret, 2)!
        defer { g_variant_unref(parameters); g_variant_unref(value) }
        guard let iv = GVariants.byteArray(parameters), iv.count == TransferCrypto.blockByteCount,
              var buffer = GVariants.byteArray(value), !buffer.isEmpty, buffer.count % iv.count == 0 else { return nil }
        guard cipher(encrypt: false, iv: iv, &buffer) else { explicit_bzero(&buffer, buffer.count); return nil }
        let padding = Int(buffer[buffer.count - 1])
        guard (1...iv.count).contains(padding), buffer.suffix(padding).allSatisfy({ $0 == UInt8(padding) }) else {
            explicit_bzero(&buffer, buffer.count)
            return nil
        }
        explicit_bzero(&buffer[buffer.count - padding], padding)
        buffer.removeLast(padding)  // keeps the storage: still wiped by the caller
        return buffer
    }

    private func cipher(encrypt: Bool, iv: [UInt8], _ buffer: inout [UInt8]) -> Bool {
        TransferCrypto.cipher(encrypt: encrypt, key: key, iv: iv, &buffer, gcrypt)
    }

    package static let servicePath = "/org/freedesktop/secrets"

    /// Fills `bytes` from the kernel's random source (``SecureRandom``).
    package static func fillRandom(_ bytes: inout [UInt8]) throws(TokenCacheError) {
        if let error = SecureRandom.fill(&bytes) { throw failure("could not read random bytes (getrandom: errno \(error))") }
    }

    private static func failure(_ problem: String) -> TokenCacheError {
        TokenCacheError(.secretServiceFailure, "The encrypted session with the Secret Service \(problem).",
                        hint: "Check the keyring daemon (tokencache doctor) and retry; nothing was read or changed")
    }
}
