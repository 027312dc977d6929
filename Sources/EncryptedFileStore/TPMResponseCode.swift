/// What a tpm2-tss response code such as `0xa000a` says, in words: the layer that answered (the
/// top byte of the low 24 bits) and, below it, a TSS base code or the TPM's own response code
/// (TPM 2.0 Part 2, 6.6: format zero errors and warnings, format one parameter, handle and
/// session errors). Part of every TPM error's message, so a raw code is never left unexplained.
enum TPMResponseCode {
    /// tpm2-tss's layers (TSS2_*_RC_LAYER >> 16).
    static let layers: [UInt32: String] = [
        0: "the TPM itself", 6: "the FAPI (tpm2-tss's feature API)", 7: "the ESAPI (tpm2-tss's enhanced system API)",
        8: "the SAPI (tpm2-tss's system API)", 9: "tpm2-tss's marshalling", 10: "the TCTI (the connection to the TPM)",
        11: "the resource manager", 12: "the TPM, through the resource manager",
    ]

    /// tpm2-tss's base codes (TSS2_BASE_RC_*), the low 16 bits of a code from a layer other than the TPM.
    static let baseCodes: [UInt32: String] = [
        1: "a general failure", 2: "not implemented", 3: "a bad context", 4: "an ABI mismatch", 5: "a bad reference",
        6: "a buffer too small", 7: "calls out of sequence", 8: "no connection", 9: "try again", 10: "an I/O error",
        11: "a bad value", 12: "not permitted", 13: "invalid sessions", 14: "no decrypt parameter", 15: "no encrypt parameter",
        16: "a bad size", 17: "a malformed response", 18: "a context too small", 19: "a response too short",
        20: "an incompatible TCTI", 21: "not supported", 22: "a bad TCTI structure", 23: "out of memory", 24: "a bad ESYS_TR",
        25: "several decrypt sessions", 26: "several encrypt sessions", 27: "a response whose authorization failed",
        28: "no configuration", 29: "a bad path", 30: "not deletable", 31: "a path that already exists", 32: "a key not found",
    ]

    /// The TPM's format-zero error and warning codes, and format-one error numbers (with 0x080).
    static let tpmCodes: [UInt32: String] = [
        0x100: "TPM_RC_INITIALIZE (the TPM was not started)", 0x101: "TPM_RC_FAILURE (the TPM is in failure mode)",
        0x103: "TPM_RC_SEQUENCE", 0x120: "TPM_RC_DISABLED", 0x121: "TPM_RC_EXCLUSIVE", 0x124: "TPM_RC_AUTH_TYPE",
        0x125: "TPM_RC_AUTH_MISSING", 0x126: "TPM_RC_POLICY", 0x127: "TPM_RC_PCR", 0x128: "TPM_RC_PCR_CHANGED",
        0x143: "TPM_RC_COMMAND_CODE (not implemented by this TPM)", 0x144: "TPM_RC_AUTHSIZE", 0x145: "TPM_RC_AUTH_CONTEXT",
        0x148: "TPM_RC_NV_LOCKED", 0x149: "TPM_RC_NV_AUTHORIZATION", 0x14A: "TPM_RC_NV_UNINITIALIZED", 0x14B: "TPM_RC_NV_SPACE",
        0x14C: "TPM_RC_NV_DEFINED", 0x153: "TPM_RC_CPHASH", 0x154: "TPM_RC_PARENT", 0x156: "TPM_RC_NO_RESULT",
        0x157: "TPM_RC_SENSITIVE",
        0x081: "TPM_RC_ASYMMETRIC", 0x082: "TPM_RC_ATTRIBUTES", 0x083: "TPM_RC_HASH", 0x084: "TPM_RC_VALUE",
        0x085: "TPM_RC_HIERARCHY (disabled or not allowed)", 0x087: "TPM_RC_KEY_SIZE", 0x088: "TPM_RC_MGF", 0x089: "TPM_RC_MODE",
        0x08A: "TPM_RC_TYPE", 0x08B: "TPM_RC_HANDLE", 0x08C: "TPM_RC_KDF", 0x08D: "TPM_RC_RANGE",
        0x08E: "TPM_RC_AUTH_FAIL (wrong authorization)", 0x08F: "TPM_RC_NONCE", 0x090: "TPM_RC_PP", 0x092: "TPM_RC_SCHEME",
        0x095: "TPM_RC_SIZE", 0x096: "TPM_RC_SYMMETRIC", 0x097: "TPM_RC_TAG", 0x098: "TPM_RC_SELECTOR",
        0x09A: "TPM_RC_INSUFFICIENT", 0x09B: "TPM_RC_SIGNATURE", 0x09C: "TPM_RC_KEY", 0x09D: "TPM_RC_POLICY_FAIL",
        0x09F: "TPM_RC_INTEGRITY (sealed by another TPM, or changed)", 0x0A0: "TPM_RC_TICKET", 0x0A1: "TPM_RC_RESERVED_BITS",
        0x0A2: "TPM_RC_BAD_AUTH", 0x0A3: "TPM_RC_EXPIRED", 0x0A4: "TPM_RC_POLICY_CC", 0x0A5: "TPM_RC_BINDING",
        0x0A6: "TPM_RC_CURVE", 0x0A7: "TPM_RC_ECC_POINT",
        0x901: "TPM_RC_CONTEXT_GAP", 0x902: "TPM_RC_OBJECT_MEMORY (no room for another object)",
        0x903: "TPM_RC_SESSION_MEMORY", 0x904: "TPM_RC_MEMORY", 0x905: "TPM_RC_SESSION_HANDLES", 0x906: "TPM_RC_OBJECT_HANDLES",
        0x907: "TPM_RC_LOCALITY", 0x908: "TPM_RC_YIELDED", 0x909: "TPM_RC_CANCELED", 0x90A: "TPM_RC_TESTING (self-test running)",
        0x920: "TPM_RC_NV_RATE", 0x921: "TPM_RC_LOCKOUT (dictionary-attack lockout)", 0x922: "TPM_RC_RETRY",
        0x923: "TPM_RC_NV_UNAVAILABLE",
    ]

    /// The code in words: "0xa000a: the TCTI (the connection to the TPM) reported an I/O error".
    static func explain(_ code: UInt32) -> String {
        let hex = "0x" + String(code, radix: 16)
        let layer = (code >> 16) & 0xFF
        let layerName = layers[layer] ?? "tpm2-tss layer \(layer)"
        let low = code & 0xFFFF
        guard layer == 0 || layer == 12 else {
            return "\(hex): \(layerName) reported \(baseCodes[low] ?? "error \(low)")"
        }
        // TPM 2.0 Part 2, 6.6.1: bit 7 set is format one: the error number in bits 0-5, and which
        // parameter (bit 6 set, number in bits 8-11), handle or session (bit 11) it concerns.
        if low & 0x80 != 0 {
            let number = (low & 0x3F) | 0x80
            let name = tpmCodes[number] ?? "error 0x\(String(number, radix: 16))"
            let n = (low >> 8) & 0xF
            let subject = low & 0x40 != 0 ? "parameter \(n)" : n & 0x8 != 0 ? "session \(n & 0x7)" : "handle \(n & 0x7)"
            return "\(hex): \(layerName) refused \(subject) of the command with \(name)"
        }
        if low & 0x100 == 0 { return "\(hex): \(layerName) answered a TPM 1.2 code \(low) (not a TPM 2.0 response)" }
        let name = tpmCodes[low & 0x97F] ?? "code 0x\(String(low & 0x97F, radix: 16))"
        return "\(hex): \(layerName) answered \(low & 0x800 != 0 ? "the warning" : "the error") \(name)"
    }
}
