// Apps import TokenCache alone: the model, the store and both backends come with it.
@_exported import EncryptedFileStore
@_exported import SecretServiceStore
@_exported import TokenCacheCore
