import TokenCacheCLI

TokenCacheCommand.main()
