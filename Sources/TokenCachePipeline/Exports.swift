// The pipeline's public API takes an HTTPTransport (the default: libcurl's): its types come with it.
@_exported import TokenCacheHTTP
