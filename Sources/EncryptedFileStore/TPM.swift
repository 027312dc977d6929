internal import COpenSSL
internal import CTSS2
import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform

/// tpm2-tss's ESAPI (`libtss2-esys`, which loads `libtss2-mu`), loaded at run time like
/// libcrypto (``LoadedLibrary``) when the TPM key source is first used.
/// `TOKENCACHE_LIBTSS2_ESYS_PATH` overrides the file loaded.
typealias LibEsys = LoadedLibrary<LibEsysDescriptor>

/// How `libtss2-esys` is found and reported (``LibEsys``).
enum LibEsysDescriptor: LibraryDescriptor {
    static let loaded = LibEsys.load()
    static let facts = LibraryFacts(name: "tpm2-tss's libtss2-esys", role: "which the TPM key source needs", sonames: ["libtss2-esys.so.0"],
                                    overrideVariable: "TOKENCACHE_LIBTSS2_ESYS_PATH", packages: ("libtss2-esys-3.0.2-0", "Fedora: tpm2-tss"),
                                    otherwise: "use the key file or a passphrase", missingCode: .backendUnavailable)

    static func resolve(_ handle: UnsafeMutableRawPointer) -> (TCEsysFunctions, missing: UnsafePointer<CChar>?) {
        var functions = TCEsysFunctions()
        let missing = tc_esys_resolve(handle, &functions)
        return (functions, missing)
    }
}

/// tpm2-tss's TCTI loader (`libtss2-tctildr`): opens the TCTI a name such as
/// `device:/dev/tpmrm0` or `swtpm:host=127.0.0.1,port=2321` names.
typealias LibTctiLdr = LoadedLibrary<LibTctiLdrDescriptor>

/// How `libtss2-tctildr` is found and reported (``LibTctiLdr``).
enum LibTctiLdrDescriptor: LibraryDescriptor {
    static let loaded = LibTctiLdr.load()
    static let facts = LibraryFacts(name: "tpm2-tss's libtss2-tctildr", role: "which the TPM key source needs", sonames: ["libtss2-tctildr.so.0"],
                                    overrideVariable: "TOKENCACHE_LIBTSS2_TCTILDR_PATH", packages: ("libtss2-tctildr0", "Fedora: tpm2-tss"),
                                    otherwise: "use the key file or a passphrase", missingCode: .backendUnavailable)

    static func resolve(_ handle: UnsafeMutableRawPointer) -> (TCTctiLdrFunctions, missing: UnsafePointer<CChar>?) {
        var functions = TCTctiLdrFunctions()
        let missing = tc_tctildr_resolve(handle, &functions)
        return (functions, missing)
    }
}

/// The file key sealed to a TPM 2.0: a keyedhash object holding the 32 key bytes, created under
/// the owner hierarchy's storage primary key (an ECC P-256 SRK made again from its template on
/// every use, so nothing stays in the TPM). Its public and private parts, in the TPM's wire
/// format, are the sealed key file; only the TPM that sealed them can load them.
enum TPMSealedKey {
    /// The TCTI used when none is configured: the kernel's resource manager.
    static let defaultTCTI = "device:/dev/tpmrm0"
    /// The variable naming another TCTI, in tpm2-tss syntax.
    static let tctiVariable = "TOKENCACHE_TPM_TCTI"
    /// The sealed key file's first bytes: format 1 is an ECC P-256 SRK parent, no PCR policy.
    private static let magic: [UInt8] = Array("TCTPM1\n".utf8)

    /// The TCTI `configured` names, else `TOKENCACHE_TPM_TCTI`, else ``defaultTCTI``.
    static func tcti(_ configured: String?) -> String {
        if let configured, !configured.isEmpty { return configured }
        // Read as secure_getenv reads it: the TCTI names a library tpm2-tss loads.
        if let variable = SecureEnvironment.value(tctiVariable) { return variable }
        return defaultTCTI
    }

    /// What to do when no TPM answers through `name`: check what names it (the variable when it
    /// is set, or the configuration), and only when nothing does, set one (#59 item 5).
    static func reachHint(_ name: String) -> String {
        if SecureEnvironment.value(tctiVariable) == name {
            return "\(tctiVariable) is set, to \(name): check that it names a TPM that runs here (a started swtpm, a device you may read: group tss), or unset it to use \(defaultTCTI); or use the key file or a passphrase"
        }
        if name != defaultTCTI {
            return "The TCTI \(name) was configured (the config file's \"tpm_tcti\", or the app): check that it names a TPM that runs here, or remove it to use \(defaultTCTI); or use the key file or a passphrase"
        }
        return "Check that the machine has a TPM 2.0 (/dev/tpmrm0, readable by you: group tss) or set \(tctiVariable) or the config file's \"tpm_tcti\"; or use the key file or a passphrase"
    }

    /// Seals `key` to the TPM: the sealed key file's contents.
    static func seal(_ key: SymmetricKey, tcti: String) throws(TokenCacheError) -> Data {
        let tpm = try TPMConnection(tcti: tcti)
        let primary = try tpm.createPrimary()
        let sensitive = SecretPage(byteCount: TC_SIZEOF_TPM2B_SENSITIVE_CREATE)
        do {  // a scope of its own: the wire copy of the key is wiped as soon as it is parsed
            // TPM2B_SENSITIVE_CREATE on the wire: size, empty userAuth, data = the key.
            let wire = SecretPage(byteCount: 6 + SymmetricKey.byteCount)
            let prefix: [UInt8] = [0, UInt8(4 + SymmetricKey.byteCount), 0, 0, 0, UInt8(SymmetricKey.byteCount)]
            wire.bytes.copyBytes(from: prefix)
            key.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: wire.bytes[6...]).copyMemory(from: $0) }
            try tpm.unmarshal(UnsafeRawBufferPointer(wire.bytes), into: sensitive.bytes.baseAddress!, tpm.esys.Tss2_MU_TPM2B_SENSITIVE_CREATE_Unmarshal, "TPM2B_SENSITIVE_CREATE")
        }
        let template = try tpm.publicArea(sealedObjectTemplate)
        defer { template.deallocate() }
        var outPrivate: OpaquePointer?
        var outPublic: OpaquePointer?
        try tpm.check(tpm.esys.Esys_Create(tpm.context, primary, ESYS_TR(TC_ESYS_TR_PASSWORD), ESYS_TR(TC_ESYS_TR_NONE), ESYS_TR(TC_ESYS_TR_NONE),
                                           OpaquePointer(sensitive.bytes.baseAddress), OpaquePointer(template), tpm.emptyInput, tpm.emptyInput,
                                           &outPrivate, &outPublic, nil, nil, nil), "Esys_Create")
        defer { tpm.esys.Esys_Free(UnsafeMutableRawPointer(outPrivate)); tpm.esys.Esys_Free(UnsafeMutableRawPointer(outPublic)) }
        var file = Data(magic)
        file += try tpm.marshal { buffer, size, offset in tpm.esys.Tss2_MU_TPM2B_PUBLIC_Marshal(outPublic, buffer, size, offset) }
        file += try tpm.marshal { buffer, size, offset in tpm.esys.Tss2_MU_TPM2B_PRIVATE_Marshal(outPrivate, buffer, size, offset) }
        return file
    }

    /// Unseals the key from a sealed key file's contents with this machine's TPM.
    /// - Throws: `tpmSealedElsewhere` when another TPM sealed it, `tpmUnavailable`, `tpmLockedOut`.
    static func unseal(_ file: Data, path: String, tcti: String) throws(TokenCacheError) -> SymmetricKey {
        guard file.starts(with: magic) else {
            throw TokenCacheError(.fileMismatch, "The sealed key file \(path) is not a tokencache TPM-sealed key.",
                                  hint: "Restore it from a backup; without it the cache cannot be read")
        }
        let tpm = try TPMConnection(tcti: tcti)
        let bytes = [UInt8](file.dropFirst(magic.count))
        let inPublic = TPMConnection.zeroed(TC_SIZEOF_TPM2B_PUBLIC)
        let inPrivate = TPMConnection.zeroed(TC_SIZEOF_TPM2B_PRIVATE)
        defer { inPublic.deallocate(); inPrivate.deallocate() }
        var offset = 0
        let damaged = TokenCacheError(.fileMismatch, "The sealed key file \(path) is damaged.",
                                      hint: "Restore it from a backup; without it the cache cannot be read")
        let parsed = bytes.withUnsafeBufferPointer { buffer in
            tpm.esys.Tss2_MU_TPM2B_PUBLIC_Unmarshal(buffer.baseAddress, buffer.count, &offset, OpaquePointer(inPublic)) == 0
                && tpm.esys.Tss2_MU_TPM2B_PRIVATE_Unmarshal(buffer.baseAddress, buffer.count, &offset, OpaquePointer(inPrivate)) == 0
        }
        guard parsed, offset == bytes.count else { throw damaged }
        let primary = try tpm.createPrimary()
        let object = try tpm.transient({ (handle) in
            tpm.esys.Esys_Load(tpm.context, primary, ESYS_TR(TC_ESYS_TR_PASSWORD), ESYS_TR(TC_ESYS_TR_NONE), ESYS_TR(TC_ESYS_TR_NONE),
                               OpaquePointer(inPrivate), OpaquePointer(inPublic), handle)
        }, operation: "Esys_Load")
        var outData: OpaquePointer?
        try tpm.check(tpm.esys.Esys_Unseal(tpm.context, object, ESYS_TR(TC_ESYS_TR_PASSWORD), ESYS_TR(TC_ESYS_TR_NONE), ESYS_TR(TC_ESYS_TR_NONE), &outData), "Esys_Unseal")
        // TPM2B_SENSITIVE_DATA: the key is copied once, into its page, and the TSS's copy wiped.
        let raw = UnsafeMutableRawPointer(outData!)
        defer { tc_cleanse(raw, TC_TPM2B_SENSITIVE_DATA_BUFFER_OFFSET + TC_TPM2_MAX_SYM_DATA); tpm.esys.Esys_Free(raw) }
        guard Int(raw.load(as: UInt16.self)) == SymmetricKey.byteCount else { throw damaged }
        return SymmetricKey(copying: UnsafeRawBufferPointer(start: raw + TC_TPM2B_SENSITIVE_DATA_BUFFER_OFFSET, count: SymmetricKey.byteCount))
    }

    /// For `tokencache doctor`: the TPM the TCTI reaches and its manufacturer, or why none.
    static func describe(tcti: String) -> Result<String, TokenCacheError> {
        Result { () throws(TokenCacheError) -> String in
            let tpm = try TPMConnection(tcti: tcti)
            var more: UInt8 = 0
            var data: OpaquePointer?
            try tpm.check(tpm.esys.Esys_GetCapability(tpm.context, ESYS_TR(TC_ESYS_TR_NONE), ESYS_TR(TC_ESYS_TR_NONE), ESYS_TR(TC_ESYS_TR_NONE),
                                                      UInt32(TC_TPM2_CAP_TPM_PROPERTIES), UInt32(TC_TPM2_PT_MANUFACTURER), 1, &more, &data),
                          "Esys_GetCapability")
            defer { tpm.esys.Esys_Free(UnsafeMutableRawPointer(data)) }
            // TPMS_CAPABILITY_DATA on the wire: capability, count, then (property, value) pairs.
            let wire = try tpm.marshal { buffer, size, offset in tpm.esys.Tss2_MU_TPMS_CAPABILITY_DATA_Marshal(data, buffer, size, offset) }
            let vendor = wire.count >= 16 ? String(decoding: wire[12..<16].filter { $0 > 0x20 && $0 < 0x7F }, as: UTF8.self) : "?"
            return "TPM 2.0, manufacturer \(vendor), via \(tcti)"
        }
    }

    // MARK: Templates (TPM2B_PUBLIC in the TPM's wire format, big-endian)

    /// The storage root key: ECC P-256, AES-128-CFB, restricted decryption, fixedTPM and
    /// fixedParent, userWithAuth, noDA; empty unique, so the TPM derives the same key every time.
    static let primaryTemplate: [UInt8] = [
        0x00, 0x23, 0x00, 0x0B,           // type ECC, nameAlg SHA-256
        0x00, 0x03, 0x04, 0x72,           // fixedTPM fixedParent sensitiveDataOrigin userWithAuth noDA restricted decrypt
        0x00, 0x00,                       // authPolicy: none
        0x00, 0x06, 0x00, 0x80, 0x00, 0x43, // symmetric AES 128 CFB
        0x00, 0x10,                       // scheme NULL
        0x00, 0x03,                       // curve NIST P-256
        0x00, 0x10,                       // kdf NULL
        0x00, 0x00, 0x00, 0x00,           // unique x, y: empty
    ]

    /// The sealed data object: keyedhash with the data given, fixedTPM and fixedParent (it cannot
    /// be duplicated to another TPM), userWithAuth with an empty auth value, noDA, no policy.
    static let sealedObjectTemplate: [UInt8] = [
        0x00, 0x08, 0x00, 0x0B,           // type KEYEDHASH, nameAlg SHA-256
        0x00, 0x00, 0x04, 0x52,           // fixedTPM fixedParent userWithAuth noDA
        0x00, 0x00,                       // authPolicy: none
        0x00, 0x10,                       // scheme NULL
        0x00, 0x00,                       // unique: empty
    ]
}

/// One connection to a TPM: owns the TCTI and ESAPI contexts and the transient objects it
/// created, and flushes and frees them all in deinit (also when an operation throws).
final class TPMConnection {
    let esys: LibEsys
    private let loader: LibTctiLdr
    private let name: String
    private var tcti: OpaquePointer?
    private(set) var context: OpaquePointer?
    private var transients: [ESYS_TR] = []
    /// Zeroed input standing in for the empty TPM2B_DATA and TPML_PCR_SELECTION arguments.
    let emptyInput: OpaquePointer
    private let emptyStorage = TPMConnection.zeroed(1024)

    /// Zeroed memory for a structure: tpm2-tss's _Unmarshal refuses a TPM2B whose size is not 0.
    static func zeroed(_ count: Int) -> UnsafeMutableRawPointer {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 8)
        memory.initializeMemory(as: UInt8.self, repeating: 0, count: count)
        return memory
    }

    init(tcti name: String) throws(TokenCacheError) {
        esys = try LibEsys.shared()
        loader = try LibTctiLdr.shared()
        self.name = name
        emptyInput = OpaquePointer(emptyStorage)
        let loaded = loader.Tss2_TctiLdr_Initialize(name, &tcti)
        guard loaded == 0 else {
            throw TokenCacheError(.backendUnavailable, "No TPM could be reached through the TCTI \(name) (\(TPMResponseCode.explain(loaded))).",
                                  hint: TPMSealedKey.reachHint(name),
                                  reason: .tpmUnavailable(tcti: name))
        }
        try check(esys.Esys_Initialize(&context, tcti, nil), "Esys_Initialize")
    }

    deinit {
        for handle in transients { _ = esys.Esys_FlushContext(context, handle) }
        if context != nil { esys.Esys_Finalize(&context) }
        if tcti != nil { loader.Tss2_TctiLdr_Finalize(&tcti) }
        emptyStorage.deallocate()
    }

    /// The storage primary key, made again from ``TPMSealedKey/primaryTemplate``.
    func createPrimary() throws(TokenCacheError) -> ESYS_TR {
        let template = try publicArea(TPMSealedKey.primaryTemplate)
        defer { template.deallocate() }
        return try transient({ (handle) in
            esys.Esys_CreatePrimary(context, ESYS_TR(TC_ESYS_TR_RH_OWNER), ESYS_TR(TC_ESYS_TR_PASSWORD), ESYS_TR(TC_ESYS_TR_NONE),
                                    ESYS_TR(TC_ESYS_TR_NONE), emptyInput, OpaquePointer(template), emptyInput, emptyInput, handle, nil, nil, nil, nil)
        }, operation: "Esys_CreatePrimary")
    }

    /// A transient object `create` makes, flushed when the connection ends.
    func transient(_ create: (UnsafeMutablePointer<ESYS_TR>) -> UInt32, operation: String) throws(TokenCacheError) -> ESYS_TR {
        var handle = ESYS_TR(TC_ESYS_TR_NONE)
        try check(create(&handle), operation)
        transients.append(handle)
        return handle
    }

    /// A TPM2B_PUBLIC from its public area on the wire (the size prefix is added here).
    func publicArea(_ area: [UInt8]) throws(TokenCacheError) -> UnsafeMutableRawPointer {
        let memory = Self.zeroed(TC_SIZEOF_TPM2B_PUBLIC)
        var wire = [UInt8(area.count >> 8), UInt8(area.count & 0xFF)] + area
        var offset = 0
        let result = esys.Tss2_MU_TPM2B_PUBLIC_Unmarshal(&wire, wire.count, &offset, OpaquePointer(memory))
        guard result == 0, offset == wire.count else {
            memory.deallocate()
            throw TokenCacheError(.crypto, "tpm2-tss could not build a TPM2B_PUBLIC (error 0x\(String(result, radix: 16))).")
        }
        return memory
    }

    func unmarshal(_ bytes: UnsafeRawBufferPointer, into memory: UnsafeMutableRawPointer,
                   _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, OpaquePointer?) -> UInt32,
                   _ type: String) throws(TokenCacheError) {
        var offset = 0
        let result = function(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, &offset, OpaquePointer(memory))
        guard result == 0, offset == bytes.count else {
            throw TokenCacheError(.crypto, "tpm2-tss could not build a \(type) (error 0x\(String(result, radix: 16))).")
        }
    }

    /// What a _Marshal call writes, in the TPM's wire format.
    func marshal(_ function: (UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> UInt32) throws(TokenCacheError) -> Data {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var offset = 0
        let result = buffer.withUnsafeMutableBufferPointer { function($0.baseAddress, $0.count, &offset) }
        guard result == 0 else { throw TokenCacheError(.crypto, "tpm2-tss could not marshal a TPM structure (error 0x\(String(result, radix: 16))).") }
        return Data(buffer[..<offset])
    }

    /// Throws the typed error of a tpm2-tss response code other than success.
    func check(_ code: UInt32, _ operation: String) throws(TokenCacheError) {
        guard code != 0 else { return }
        let layer = code & UInt32(TC_TSS2_RC_LAYER_MASK)
        // The code in words (its layer, then the TSS or TPM code), never a bare hex number.
        let hex = TPMResponseCode.explain(code)
        let fromTPM = layer == 0 || layer == UInt32(TC_TSS2_RESMGR_TPM_RC_LAYER)
        // Format one (parameter, handle or session errors) carries the error number in its low 6 bits.
        let tpmCode = code & UInt32(TC_TPM2_RC_FMT1) != 0 ? (code & 0x3F) | UInt32(TC_TPM2_RC_FMT1) : code & 0xFFF
        if fromTPM && tpmCode == UInt32(TC_TPM2_RC_INTEGRITY) {
            throw TokenCacheError(.fileAuthenticationFailed,
                                  "The cache key was sealed by another TPM than the one at \(name) (\(operation) failed its integrity check, \(hex)): a copied home directory cannot be decrypted on another machine.",
                                  hint: "Read the cache on the machine that wrote it, or sign in again here after moving the cache away; nothing was changed",
                                  reason: .tpmSealedElsewhere)
        }
        // Out of object memory too: without a resource manager, objects of killed processes stay loaded.
        let busy = [TC_TPM2_RC_LOCKOUT, TC_TPM2_RC_RETRY, TC_TPM2_RC_YIELDED, TC_TPM2_RC_TESTING, TC_TPM2_RC_NV_RATE,
                    TC_TPM2_RC_OBJECT_MEMORY, TC_TPM2_RC_MEMORY].map { UInt32($0) }
        if fromTPM && busy.contains(tpmCode) {
            throw TokenCacheError(.backendUnavailable, "The TPM at \(name) is busy or in dictionary-attack lockout (\(operation): \(hex)).",
                                  hint: "Try again later; a lockout ends after the TPM's recovery time, or the owner clears it with tpm2_dictionarylockout -c; a TPM used without a resource manager (/dev/tpm0) may need tpm2_flushcontext -t",
                                  reason: .tpmLockedOut)
        }
        if fromTPM && [TC_TPM2_RC_BAD_AUTH, TC_TPM2_RC_AUTH_FAIL].map({ UInt32($0) }).contains(tpmCode) {
            throw TokenCacheError(.backendUnavailable, "The TPM at \(name) refused the storage hierarchy (\(operation): \(hex)): its owner hierarchy has a password.",
                                  hint: "The TPM key source needs an owner hierarchy without a password; use the key file or a passphrase",
                                  reason: .tpmUnavailable(tcti: name))
        }
        // The TCTI's own errors, and the ESAPI's "no connection" and I/O errors from below it.
        if !fromTPM && (layer == UInt32(TC_TSS2_TCTI_RC_LAYER) || [8, 10].contains(code & 0xFFFF) || operation == "Esys_Initialize") {
            throw TokenCacheError(.backendUnavailable, "No TPM answered through the TCTI \(name) (\(operation): \(hex)).",
                                  hint: TPMSealedKey.reachHint(name),
                                  reason: .tpmUnavailable(tcti: name))
        }
        throw TokenCacheError(.crypto, "The TPM at \(name) failed \(operation) (\(hex)).", hint: "Nothing was changed")
    }
}
