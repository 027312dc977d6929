import TokenCacheCLI

/// The `tokencache` executable: everything lives in TokenCacheCLI.
@main
struct TokenCacheMain {
    static func main() async {
        await TokenCacheCommand.main()
    }
}
