#ifndef TOKENCACHE_CCURL_SHIM_H
#define TOKENCACHE_CCURL_SHIM_H
// libcurl is not linked: it is loaded at run time with dlopen on the first HTTP request (see
// Curl.swift). Linking it (directly, or through FoundationNetworking) loads about 25 more
// shared libraries (TLS, Kerberos, LDAP, ...) into every process at start-up, which costs a
// command-line lookup 10 ms and 12 MB although most runs never make a request. Building needs
// no curl headers: the part of libcurl's stable ABI the transport uses is declared here, with
// the values of curl/curl.h (libcurl 7.x and 8.x).
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef void TCCurl;
typedef struct TCCurlSlist TCCurlSlist;
typedef int TCCurlCode;

// CURLoption values: type base (LONG 0, OBJECTPOINT 10000, FUNCTIONPOINT 20000, OFF_T 30000) + number.
enum {
    TC_CURLOPT_WRITEDATA = 10001,
    TC_CURLOPT_URL = 10002,
    TC_CURLOPT_ERRORBUFFER = 10010,
    TC_CURLOPT_WRITEFUNCTION = 20011,
    TC_CURLOPT_HTTPHEADER = 10023,
    TC_CURLOPT_HEADERDATA = 10029,
    TC_CURLOPT_NOPROGRESS = 43,
    TC_CURLOPT_POST = 47,
    TC_CURLOPT_FOLLOWLOCATION = 52,
    TC_CURLOPT_XFERINFODATA = 10057,
    TC_CURLOPT_CAINFO = 10065,
    TC_CURLOPT_HEADERFUNCTION = 20079,
    TC_CURLOPT_HTTPGET = 80,
    TC_CURLOPT_NOSIGNAL = 99,
    TC_CURLOPT_TIMEOUT_MS = 155,
    TC_CURLOPT_CONNECTTIMEOUT_MS = 156,
    TC_CURLOPT_PROTOCOLS = 181,
    TC_CURLOPT_COPYPOSTFIELDS = 10165,
    TC_CURLOPT_POSTFIELDSIZE_LARGE = 30120,
    TC_CURLOPT_XFERINFOFUNCTION = 20219,
};
enum { TC_CURLPROTO_HTTP = 1, TC_CURLPROTO_HTTPS = 2 };
enum { TC_CURLINFO_RESPONSE_CODE = 0x200000 + 2 };
enum { TC_CURL_GLOBAL_DEFAULT = 3, TC_CURL_ERROR_SIZE = 256 };
// CURLcode values the transport tells apart.
enum {
    TC_CURLE_OK = 0,
    TC_CURLE_UNSUPPORTED_PROTOCOL = 1,
    TC_CURLE_COULDNT_RESOLVE_HOST = 6,
    TC_CURLE_COULDNT_CONNECT = 7,
    TC_CURLE_WRITE_ERROR = 23,
    TC_CURLE_OPERATION_TIMEDOUT = 28,
    TC_CURLE_SSL_CONNECT_ERROR = 35,
    TC_CURLE_ABORTED_BY_CALLBACK = 42,
    TC_CURLE_PEER_FAILED_VERIFICATION = 60,
    TC_CURLE_SSL_CERTPROBLEM = 58,
    TC_CURLE_SSL_CACERT_BADFILE = 77,
};

typedef size_t (*TCCurlDataCallback)(char *data, size_t size, size_t count, void *context);
typedef int (*TCCurlProgressCallback)(void *context, int64_t downloadTotal, int64_t downloaded,
                                      int64_t uploadTotal, int64_t uploaded);

/// The functions the transport calls, resolved with dlsym once.
typedef struct {
    TCCurlCode (*curl_global_init)(long flags);
    TCCurl *(*curl_easy_init)(void);
    TCCurlCode (*curl_easy_setopt)(TCCurl *handle, int option, ...);
    TCCurlCode (*curl_easy_perform)(TCCurl *handle);
    TCCurlCode (*curl_easy_getinfo)(TCCurl *handle, int info, ...);
    void (*curl_easy_cleanup)(TCCurl *handle);
    const char *(*curl_easy_strerror)(TCCurlCode code);
    TCCurlSlist *(*curl_slist_append)(TCCurlSlist *list, const char *string);
    void (*curl_slist_free_all)(TCCurlSlist *list);
    const char *(*curl_version)(void);
} TCCurlFunctions;

/// Resolves every function; returns the name of the first one missing, or NULL.
static inline const char *tc_curl_resolve(void *library, TCCurlFunctions *functions) {
#define TC_RESOLVE(name) \
    if (!(*(void **)&functions->name = dlsym(library, #name))) return #name;
    TC_RESOLVE(curl_global_init)
    TC_RESOLVE(curl_easy_init)
    TC_RESOLVE(curl_easy_setopt)
    TC_RESOLVE(curl_easy_perform)
    TC_RESOLVE(curl_easy_getinfo)
    TC_RESOLVE(curl_easy_cleanup)
    TC_RESOLVE(curl_easy_strerror)
    TC_RESOLVE(curl_slist_append)
    TC_RESOLVE(curl_slist_free_all)
    TC_RESOLVE(curl_version)
#undef TC_RESOLVE
    return NULL;
}

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
// wrapper per argument type.
static inline TCCurlCode tc_curl_setopt_long(const TCCurlFunctions *f, TCCurl *h, int option, long value) {
    return f->curl_easy_setopt(h, option, value);
}
static inline TCCurlCode tc_curl_setopt_pointer(const TCCurlFunctions *f, TCCurl *h, int option, const void *value) {
    return f->curl_easy_setopt(h, option, value);
}
static inline TCCurlCode tc_curl_setopt_size(const TCCurlFunctions *f, TCCurl *h, int option, int64_t value) {
    return f->curl_easy_setopt(h, option, (int64_t)value);  // curl_off_t is 64-bit
}
static inline TCCurlCode tc_curl_setopt_data_callback(const TCCurlFunctions *f, TCCurl *h, int option, TCCurlDataCallback value) {
    return f->curl_easy_setopt(h, option, value);
}
static inline TCCurlCode tc_curl_setopt_progress_callback(const TCCurlFunctions *f, TCCurl *h, int option, TCCurlProgressCallback value) {
    return f->curl_easy_setopt(h, option, value);
}
static inline TCCurlCode tc_curl_getinfo_long(const TCCurlFunctions *f, TCCurl *h, int info, long *value) {
    return f->curl_easy_getinfo(h, info, value);
}

#endif
