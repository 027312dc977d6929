// Apps import TokenCache alone: the model, the store, both backends and the HTTP transport types come with it.
@_exported import EncryptedFileStore
@_exported import SecretServiceStore
@_exported import TokenCacheCore
@_exported import TokenCacheHTTP
@_exported import TokenCachePipeline
