import Testing
import TokenCacheCLI
import TokenCacheTestSupport

/// `tokencache` starts connecting to the Secret Service before it parses its arguments, for the
/// command lines that may use it; the guess is made from the raw arguments.
@Suite("Connecting while the command line is parsed", .harness)
struct EarlyConnectionTests {
    @Test("Subcommands that open the cache connect early; help, --version, unknown words and --backend file do not")
    func guessFromRawArguments() {
        for arguments in [["token", "--client", "c", "--scopes", "User.Read"], ["list"], ["list", "--backend", "secret-service"],
                          ["remove", "--account", "a@b.c"], ["doctor"], ["migrate", "--from", "file", "--to", "secret-service"],
                          ["export", "--backend", "auto"], ["list", "--group", "file"]] {
            #expect(TokenCacheCommand.mayUseSecretService(arguments), "\(arguments)")
        }
        for arguments in [[], ["--version"], ["--help"], ["help", "token"], ["token", "--help"], ["list", "-h"], ["bogus"],
                          ["list", "--backend", "file"], ["token", "--backend=file", "--client", "c", "--scopes", "s"]] {
            #expect(!TokenCacheCommand.mayUseSecretService(arguments), "\(arguments)")
        }
    }

    @Test("TOKENCACHE_BACKEND=file means no early connection, unless --backend chooses otherwise")
    func backendVariable() {
        #expect(!TokenCacheCommand.mayUseSecretService(["list"], backendVariable: "file"))
        #expect(TokenCacheCommand.mayUseSecretService(["list"], backendVariable: "auto"))
        #expect(TokenCacheCommand.mayUseSecretService(["list"], backendVariable: nil))
        #expect(TokenCacheCommand.mayUseSecretService(["list", "--backend", "auto"], backendVariable: "file"))
        #expect(TokenCacheCommand.mayUseSecretService(["list", "--backend=secret-service"], backendVariable: "file"))
    }
}
