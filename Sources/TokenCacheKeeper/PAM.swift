#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import TokenCacheCore
import TokenCachePlatform

// Hand-written: five functions and three two-field structs of a stable C ABI, not worth a C module
// and libpam's development headers (libpam0g-dev) on every build machine.

/// `struct pam_message`: what a module asks or says.
struct PAMMessage {
    var style: Int32
    var text: UnsafePointer<CChar>?
}

/// `struct pam_response`: the answer to one message (malloc'd; libpam frees it).
struct PAMResponse {
    var text: UnsafeMutablePointer<CChar>?
    var code: Int32
}

/// `struct pam_conv`: the conversation function and its context.
struct PAMConversation {
    /// (count, `const struct pam_message **`, `struct pam_response **`, context): raw pointers,
    /// as a C function type can name no Swift struct.
    typealias Function = @convention(c) (Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32
    var function: Function?
    var context: UnsafeMutableRawPointer?
}

/// The libpam functions the keeper calls.
struct PAMFunctions {
    /// (service, user, `const struct pam_conv *`, handle).
    typealias Start = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeRawPointer?, UnsafeMutablePointer<OpaquePointer?>?) -> Int32
    /// pam_authenticate, pam_acct_mgmt and pam_end: a handle and flags (or the last status).
    typealias Step = @convention(c) (OpaquePointer?, Int32) -> Int32
    typealias Describe = @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?
    /// pam_set_item: (handle, item type, `const void *` item).
    typealias SetItem = @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?) -> Int32
    /// pam_get_item: (handle, item type, `const void **` item).
    typealias GetItem = @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<UnsafeRawPointer?>?) -> Int32
    var pam_start: Start?
    var pam_authenticate: Step?
    var pam_acct_mgmt: Step?
    var pam_end: Step?
    var pam_strerror: Describe?
    var pam_set_item: SetItem?
    var pam_get_item: GetItem?
}

/// Linux-PAM, loaded when the first consent is asked for, by absolute path from the system
/// library directories (``DynamicLibrary``), as libcrypto and libgcrypt are.
enum PAM: LibraryDescriptor {
    static let facts = LibraryFacts(
        name: "libpam", role: "which the token keeper checks consent passwords with", sonames: ["libpam.so.0"],
        overrideVariable: "TOKENCACHE_LIBPAM_PATH", packages: (apt: "libpam0g", others: "Fedora: pam"),
        otherwise: "let an administrator add the app to the apps directory", missingCode: .backendUnavailable)
    static let loaded = LoadedLibrary<PAM>.load()

    static func resolve(_ handle: UnsafeMutableRawPointer) -> (PAMFunctions, missing: UnsafePointer<CChar>?) {
        var functions = PAMFunctions()
        func symbol<T>(_ name: StaticString, _ type: T.Type) -> T? {
            dlsym(handle, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)).map { unsafeBitCast($0, to: T.self) }
        }
        functions.pam_start = symbol("pam_start", PAMFunctions.Start.self)
        functions.pam_authenticate = symbol("pam_authenticate", PAMFunctions.Step.self)
        functions.pam_acct_mgmt = symbol("pam_acct_mgmt", PAMFunctions.Step.self)
        functions.pam_end = symbol("pam_end", PAMFunctions.Step.self)
        functions.pam_strerror = symbol("pam_strerror", PAMFunctions.Describe.self)
        functions.pam_set_item = symbol("pam_set_item", PAMFunctions.SetItem.self)
        functions.pam_get_item = symbol("pam_get_item", PAMFunctions.GetItem.self)
        let missing: StaticString? = functions.pam_start == nil ? "pam_start" : functions.pam_authenticate == nil ? "pam_authenticate"
            : functions.pam_acct_mgmt == nil ? "pam_acct_mgmt" : functions.pam_end == nil ? "pam_end" : functions.pam_strerror == nil ? "pam_strerror"
            : functions.pam_set_item == nil ? "pam_set_item" : functions.pam_get_item == nil ? "pam_get_item" : nil
        return (functions, missing.map { UnsafeRawPointer($0.utf8Start).assumingMemoryBound(to: CChar.self) })
    }

    // <security/_pam_types.h>
    static let success: Int32 = 0
    static let promptEchoOff: Int32 = 1
    static let promptEchoOn: Int32 = 2
    static let errorMessage: Int32 = 3
    static let textInfo: Int32 = 4
    static let itemUser: Int32 = 2
    static let itemTTY: Int32 = 3
    /// What PAM_TTY says: the keeper has no terminal (modules that look at it see a service, as sshd's "ssh").
    static let ttyName = "tokencache-keeper"
    static let conversationError: Int32 = 19
    static let bufferError: Int32 = 5
    static let silent: Int32 = 0x8000
    static let disallowNullPassword: Int32 = 0x0001

    /// What PAM said of a user's password.
    enum Verdict: Sendable, Equatable {
        /// pam_authenticate and pam_acct_mgmt both succeeded.
        case verified
        /// pam_authenticate failed (a wrong password, an unknown user …): PAM's words.
        case notAuthenticated(String)
        /// The password was right but the account may not be used now (expired, locked).
        case accountRefused(String)
        /// libpam could not be loaded or the service could not be started.
        case unavailable(String)
    }

    /// Checks `password` of `user` with PAM service `service` (pam_authenticate, then
    /// pam_acct_mgmt). Blocking (modules may sleep on failure): call on the blocking pool.
    static func verify(service: String, user: String, password: PAMSecret) -> Verdict {
        // The hand-written structs must have C's layout (two 8-byte fields each on 64-bit Linux).
        guard MemoryLayout<PAMMessage>.stride == 16, MemoryLayout<PAMResponse>.stride == 16, MemoryLayout<PAMConversation>.stride == 16 else {
            return .unavailable("the PAM structures' layout is not the one this build expects")
        }
        let library: LoadedLibrary<PAM>
        do throws(TokenCacheError) { library = try LoadedLibrary<PAM>.shared() } catch { return .unavailable(error.message) }
        guard let session = PAMSession(library: library, service: service, user: user, password: password) else {
            return .unavailable("pam_start failed for service \(service)")
        }
        guard session.setTTY() == success else { return .unavailable("pam_set_item(PAM_TTY) failed for service \(service)") }
        let authenticated = session.run(library.pam_authenticate)
        guard authenticated == success else { return .notAuthenticated(session.describe(authenticated)) }
        // A module may change PAM_USER: the password checked must be the caller's user's, no one else's.
        guard session.user() == user else { return .notAuthenticated("PAM authenticated another user than \(user)") }
        let account = session.run(library.pam_acct_mgmt)
        guard account == success else { return .accountRefused(session.describe(account)) }
        return .verified
    }
}

/// A password's bytes in memory of its own (malloc'd, NUL-terminated), zeroed when freed.
package final class PAMSecret: @unchecked Sendable {
    // @unchecked: written once in init, read by PAM's conversation, wiped in deinit.
    let bytes: UnsafeMutableBufferPointer<CChar>

    /// Copies `password`; the caller wipes its own copy.
    package init(_ password: some Collection<UInt8>) {
        bytes = .allocate(capacity: password.count + 1)
        for (index, byte) in password.enumerated() { bytes[index] = CChar(bitPattern: byte) }
        bytes[password.count] = 0
    }

    deinit {
        explicit_bzero(bytes.baseAddress!, bytes.count)
        bytes.deallocate()
    }
}

/// One PAM transaction (pam_start … pam_end): ended in deinit with the last status, so no path
/// leaks a handle.
final class PAMSession {
    private let library: LoadedLibrary<PAM>
    private var handle: OpaquePointer?
    private var status: Int32 = PAM.success
    /// Kept alive until pam_end: the conversation's context points at the password.
    private let conversation: UnsafeMutablePointer<PAMConversation>
    private let password: PAMSecret

    init?(library: LoadedLibrary<PAM>, service: String, user: String, password: PAMSecret) {
        (self.library, self.password) = (library, password)
        conversation = .allocate(capacity: 1)
        let converse: PAMConversation.Function = { PAMSession.converse($0, $1, $2, $3) }
        conversation.initialize(to: PAMConversation(function: converse, context: Unmanaged.passUnretained(password).toOpaque()))
        status = library.pam_start(service, user, UnsafeRawPointer(conversation), &handle)
        // On failure deinit still runs (every property is set): it frees the conversation, once.
        guard status == PAM.success, handle != nil else { return nil }
    }

    func run(_ function: PAMFunctions.Step) -> Int32 {
        status = function(handle, PAM.silent | PAM.disallowNullPassword)
        return status
    }

    /// Sets PAM_TTY (some modules refuse, or behave differently, without one).
    func setTTY() -> Int32 {
        PAM.ttyName.withCString { library.pam_set_item(handle, PAM.itemTTY, $0) }
    }

    /// PAM_USER as PAM holds it now; nil when it has none.
    func user() -> String? {
        var item: UnsafeRawPointer?
        guard library.pam_get_item(handle, PAM.itemUser, &item) == PAM.success, let item else { return nil }
        return String(cString: item.assumingMemoryBound(to: CChar.self))
    }

    func describe(_ code: Int32) -> String {
        library.pam_strerror(handle, code).map { String(cString: $0) } ?? "PAM error \(code)"
    }

    deinit {
        if handle != nil { _ = library.pam_end(handle, status) }
        conversation.deallocate()
        withExtendedLifetime(password) {}
    }

    /// Answers every hidden prompt with the password (the password module's one question); any
    /// other question, or a message style it does not know, gets no answer (a conversation
    /// error), and error and information messages are ignored.
    static func converse(_ count: Int32, _ rawMessages: UnsafeMutableRawPointer?, _ rawResponses: UnsafeMutableRawPointer?,
                         _ context: UnsafeMutableRawPointer?) -> Int32 {
        guard count > 0, let rawMessages, let rawResponses, let context else { return PAM.conversationError }
        let messages = rawMessages.assumingMemoryBound(to: UnsafePointer<PAMMessage>?.self)
        let responses = rawResponses.assumingMemoryBound(to: UnsafeMutablePointer<PAMResponse>?.self)
        let password = Unmanaged<PAMSecret>.fromOpaque(context).takeUnretainedValue()
        guard let answers = calloc(Int(count), MemoryLayout<PAMResponse>.stride)?.bindMemory(to: PAMResponse.self, capacity: Int(count)) else {
            return PAM.bufferError
        }
        // Frees what was answered so far (zeroed) when the conversation fails.
        func fail(_ code: Int32, answered: Int) -> Int32 {
            for index in 0..<answered { freeAnswer(answers[index].text) }
            free(answers)
            return code
        }
        for index in 0..<Int(count) {
            guard let message = messages[index] else { return fail(PAM.conversationError, answered: index) }
            switch message.pointee.style {
            case PAM.promptEchoOff:
                guard let copy = strdup(password.bytes.baseAddress!) else { return fail(PAM.bufferError, answered: index) }
                answers[index].text = copy
            case PAM.errorMessage, PAM.textInfo:
                break  // nothing to show, no one to show it to
            default:
                // PAM_PROMPT_ECHO_ON (the user name was given), PAM_BINARY_PROMPT, a style of a later Linux-PAM: no answer.
                return fail(PAM.conversationError, answered: index)
            }
        }
        responses.pointee = answers
        return PAM.success
    }

    /// Frees an answer the conversation made and will not hand over, zeroed first.
    private static func freeAnswer(_ text: UnsafeMutablePointer<CChar>?) {
        guard let text else { return }
        explicit_bzero(text, strlen(text))
        free(text)
    }
}

/// The keeper's PAM conversation run on messages of the given styles, as a module would call it:
/// for the tests of what it answers (no PAM involved).
package enum PAMConversationProbe {
    /// The conversation's status and, when it succeeded, each message's answer (nil: none).
    package static func answer(styles: [Int32], password: String) -> (status: Int32, answers: [String?]) {
        let secret = PAMSecret(password.utf8)
        let texts = styles.map { _ in strdup("Question: ")! }
        defer { texts.forEach { free($0) } }
        var messages = zip(styles, texts).map { PAMMessage(style: $0, text: UnsafePointer($1)) }
        return messages.withUnsafeMutableBufferPointer { buffer in
            var pointers: [UnsafePointer<PAMMessage>?] = (0..<buffer.count).map { UnsafePointer(buffer.baseAddress! + $0) }
            var responses: UnsafeMutablePointer<PAMResponse>?
            let status = pointers.withUnsafeMutableBufferPointer { list in
                withUnsafeMutablePointer(to: &responses) { out in
                    PAMSession.converse(Int32(styles.count), UnsafeMutableRawPointer(list.baseAddress!), UnsafeMutableRawPointer(out),
                                        Unmanaged.passUnretained(secret).toOpaque())
                }
            }
            guard status == PAM.success, let responses else { return (status, []) }
            defer { free(responses) }
            return (status, (0..<styles.count).map { index in
                guard let text = responses[index].text else { return nil }
                defer { explicit_bzero(text, strlen(text)); free(text) }
                return String(cString: text)
            })
        }
    }
}
