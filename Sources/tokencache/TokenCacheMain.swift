import TokenCache
import TokenCacheCLI
#if canImport(Glibc)
import Glibc
#endif

/// The `tokencache` executable: everything lives in TokenCacheCLI.
@main
struct TokenCacheMain {
    /// Synchronous on purpose: an async main hands the main thread to `dispatch_main`, which ends it
    /// with `pthread_exit` (libgcc_s loaded and the stack unwound at every start).
    static func main() {
        // First: no core file (or same-user ptrace) may expose tokens this process decrypts.
        CoreDumps.disable()
        MallocTuning.apply()
        // tpm2-tss logs its own errors to stderr; the TPM key source reports them as typed errors
        // (and doctor as its TPM check). Set while the process has one thread; TSS2_LOG given wins.
        setenv("TSS2_LOG", "all+none", 0)
        TokenCacheCommand.refuseUnusableArguments()
        // Connecting to the Secret Service (loading libsecret, the bus handshake, the session's
        // key exchange) overlaps parsing the command line.
        if TokenCacheCommand.mayUseSecretService(Array(CommandLine.arguments.dropFirst())) {
            SecretServiceBackend.connectInBackground()
        }
        TokenCacheCommand.main()
    }
}
