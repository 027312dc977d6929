#ifndef TOKENCACHE_CGCRYPT_TRANSFER_H
#define TOKENCACHE_CGCRYPT_TRANSFER_H
// The libgcrypt functions the Secret Service's encrypted transfer uses
// ("dh-ietf1024-sha256-aes128-cbc-pkcs7", composed in Swift: TransferCrypto.swift), the library
// libsecret uses for it. Opened with dlopen (see Gcrypt.swift); the few declarations needed are
// copied here from libgcrypt 1.10's gcrypt.h, and scripts/check-libgcrypt-abi.sh checks them
// against the real header. Only declarations, the dlsym table fill and the initialization (a
// variadic gcry_control call, which Swift cannot make) are C.
#include <dlfcn.h>
#include <stddef.h>
#include <sys/random.h>  // getrandom, for SecureRandom

#ifndef TC_CHECK_AGAINST_GCRYPT_HEADERS
typedef struct gcry_mpi *gcry_mpi_t;
typedef struct gcry_md_handle *gcry_md_hd_t;
typedef struct gcry_cipher_handle *gcry_cipher_hd_t;
typedef unsigned int gcry_error_t;
enum gcry_ctl_cmds { GCRYCTL_INITIALIZATION_FINISHED = 38, GCRYCTL_INITIALIZATION_FINISHED_P = 39 };
enum gcry_mpi_format { GCRYMPI_FMT_USG = 5 };
enum gcry_cipher_algos { GCRY_CIPHER_AES = 7 };
enum gcry_cipher_modes { GCRY_CIPHER_MODE_CBC = 3 };
enum gcry_md_algos { GCRY_MD_SHA256 = 8 };
enum gcry_md_flags { GCRY_MD_FLAG_HMAC = 2 };
#endif

/// The libgcrypt functions the transfer uses, resolved with dlsym; each field has the name and
/// the exact signature of the libgcrypt function.
typedef struct {
    const char *(*gcry_check_version)(const char *req_version);
    gcry_error_t (*gcry_control)(enum gcry_ctl_cmds CMD, ...);
    gcry_mpi_t (*gcry_mpi_new)(unsigned int nbits);
    void (*gcry_mpi_release)(gcry_mpi_t a);
    gcry_mpi_t (*gcry_mpi_set_ui)(gcry_mpi_t w, unsigned long u);
    int (*gcry_mpi_cmp)(const gcry_mpi_t u, const gcry_mpi_t v);
    int (*gcry_mpi_cmp_ui)(const gcry_mpi_t u, unsigned long v);
    void (*gcry_mpi_sub_ui)(gcry_mpi_t w, gcry_mpi_t u, unsigned long v);
    gcry_error_t (*gcry_mpi_scan)(gcry_mpi_t *ret_mpi, enum gcry_mpi_format format, const void *buffer, size_t buflen,
                                  size_t *nscanned);
    gcry_error_t (*gcry_mpi_print)(enum gcry_mpi_format format, unsigned char *buffer, size_t buflen, size_t *nwritten,
                                   const gcry_mpi_t a);
    void (*gcry_mpi_powm)(gcry_mpi_t w, const gcry_mpi_t b, const gcry_mpi_t e, const gcry_mpi_t m);
    gcry_error_t (*gcry_md_open)(gcry_md_hd_t *h, int algo, unsigned int flags);
    gcry_error_t (*gcry_md_setkey)(gcry_md_hd_t hd, const void *key, size_t keylen);
    void (*gcry_md_write)(gcry_md_hd_t hd, const void *buffer, size_t length);
    unsigned char *(*gcry_md_read)(gcry_md_hd_t hd, int algo);
    void (*gcry_md_close)(gcry_md_hd_t hd);
    gcry_error_t (*gcry_cipher_open)(gcry_cipher_hd_t *handle, int algo, int mode, unsigned int flags);
    gcry_error_t (*gcry_cipher_setkey)(gcry_cipher_hd_t hd, const void *key, size_t keylen);
    gcry_error_t (*gcry_cipher_setiv)(gcry_cipher_hd_t hd, const void *iv, size_t ivlen);
    gcry_error_t (*gcry_cipher_encrypt)(gcry_cipher_hd_t h, void *out, size_t outsize, const void *in, size_t inlen);
    gcry_error_t (*gcry_cipher_decrypt)(gcry_cipher_hd_t h, void *out, size_t outsize, const void *in, size_t inlen);
    void (*gcry_cipher_close)(gcry_cipher_hd_t h);
} TCGcryptFunctions;

/// Resolves every field from a dlopen handle. Returns NULL when all were found, else the name of
/// the first missing function.
static inline const char *tc_gcrypt_resolve(void *handle, TCGcryptFunctions *functions) {
#define TC_RESOLVE_GCRY(name) \
    if ((functions->name = (__typeof__(functions->name))dlsym(handle, #name)) == NULL) return #name
    TC_RESOLVE_GCRY(gcry_check_version);
    TC_RESOLVE_GCRY(gcry_control);
    TC_RESOLVE_GCRY(gcry_mpi_new);
    TC_RESOLVE_GCRY(gcry_mpi_release);
    TC_RESOLVE_GCRY(gcry_mpi_set_ui);
    TC_RESOLVE_GCRY(gcry_mpi_cmp);
    TC_RESOLVE_GCRY(gcry_mpi_cmp_ui);
    TC_RESOLVE_GCRY(gcry_mpi_sub_ui);
    TC_RESOLVE_GCRY(gcry_mpi_scan);
    TC_RESOLVE_GCRY(gcry_mpi_print);
    TC_RESOLVE_GCRY(gcry_mpi_powm);
    TC_RESOLVE_GCRY(gcry_md_open);
    TC_RESOLVE_GCRY(gcry_md_setkey);
    TC_RESOLVE_GCRY(gcry_md_write);
    TC_RESOLVE_GCRY(gcry_md_read);
    TC_RESOLVE_GCRY(gcry_md_close);
    TC_RESOLVE_GCRY(gcry_cipher_open);
    TC_RESOLVE_GCRY(gcry_cipher_setkey);
    TC_RESOLVE_GCRY(gcry_cipher_setiv);
    TC_RESOLVE_GCRY(gcry_cipher_encrypt);
    TC_RESOLVE_GCRY(gcry_cipher_decrypt);
    TC_RESOLVE_GCRY(gcry_cipher_close);
#undef TC_RESOLVE_GCRY
    return NULL;
}

/// Initializes libgcrypt unless the process already has (libsecret's own check, so whichever
/// comes first sets it up and the other leaves it alone). Returns NULL, or why it failed.
static inline const char *tc_gcrypt_prepare(const TCGcryptFunctions *g) {
    if (g->gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) return NULL;
    if (g->gcry_check_version("1.5.0") == NULL) return "libgcrypt is older than 1.5";
    g->gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    return NULL;
}

#endif
