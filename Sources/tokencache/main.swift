import TokenCacheCLI

await TokenCacheCommand.main()
