#ifndef TOKENCACHE_CLIBSECRET_TRANSFER_H
#define TOKENCACHE_CLIBSECRET_TRANSFER_H
// The Secret Service's encrypted transfer ("dh-ietf1024-sha256-aes128-cbc-pkcs7"), done with
// libgcrypt: the library libsecret itself uses for it, already loaded as libsecret's dependency,
// so using it costs no start-up. Opened with dlopen like libsecret (see Gcrypt.swift); the few
// declarations needed are copied here from libgcrypt 1.10's gcrypt.h, and
// scripts/check-libsecret-abi.sh checks them against the real header.
//
// What the exchange is (Secret Service API, "Transfer of Secrets"; the same steps as libsecret's
// and gnome-keyring's egg-dh and egg-hkdf): a Diffie-Hellman exchange in the 1024-bit MODP group
// of RFC 2409 (generator 2); the shared value, big-endian and left-padded with zeros to the
// prime's 128 bytes, is the input of HKDF-SHA256 (no salt, so 32 zero bytes; no info) for a
// 16-byte AES-128 key; each secret is AES-128-CBC with PKCS#7 padding, its IV sent beside it.
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>

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

enum {
    TC_DH_PRIME_BYTES = 128,
    TC_TRANSFER_KEY_BYTES = 16,
    TC_TRANSFER_BLOCK_BYTES = 16,
};

/// The 1024-bit MODP group's prime (RFC 2409, section 6.2; its generator is 2).
static const unsigned char tc_dh_ietf1024_prime[TC_DH_PRIME_BYTES] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xC9, 0x0F, 0xDA, 0xA2, 0x21, 0x68, 0xC2, 0x34,
    0xC4, 0xC6, 0x62, 0x8B, 0x80, 0xDC, 0x1C, 0xD1, 0x29, 0x02, 0x4E, 0x08, 0x8A, 0x67, 0xCC, 0x74,
    0x02, 0x0B, 0xBE, 0xA6, 0x3B, 0x13, 0x9B, 0x22, 0x51, 0x4A, 0x08, 0x79, 0x8E, 0x34, 0x04, 0xDD,
    0xEF, 0x95, 0x19, 0xB3, 0xCD, 0x3A, 0x43, 0x1B, 0x30, 0x2B, 0x0A, 0x6D, 0xF2, 0x5F, 0x14, 0x37,
    0x4F, 0xE1, 0x35, 0x6D, 0x6D, 0x51, 0xC2, 0x45, 0xE4, 0x85, 0xB5, 0x76, 0x62, 0x5E, 0x7E, 0xC6,
    0xF4, 0x4C, 0x42, 0xE9, 0xA6, 0x37, 0xED, 0x6B, 0x0B, 0xFF, 0x5C, 0xB6, 0xF4, 0x06, 0xB7, 0xED,
    0xEE, 0x38, 0x6B, 0xFB, 0x5A, 0x89, 0x9F, 0xA5, 0xAE, 0x9F, 0x24, 0x11, 0x7C, 0x4B, 0x1F, 0xE6,
    0x49, 0x28, 0x66, 0x51, 0xEC, 0xE6, 0x53, 0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
};

/// `base` raised to the private `exponent` (big-endian bytes), modulo the prime, written
/// big-endian into `result` left-padded to 128 bytes. `base` NULL means the generator, 2.
/// Returns 0; -1 when `base` is not a valid public value (outside 2 ... p-2, which would give
/// away the exponent or a trivial key); -2 when libgcrypt failed.
static inline int tc_dh_power(const TCGcryptFunctions *g, const unsigned char *base, size_t base_length,
                              const unsigned char *exponent, size_t exponent_length,
                              unsigned char result[TC_DH_PRIME_BYTES]) {
    gcry_mpi_t prime = NULL, b = NULL, e = NULL, limit = NULL, r = NULL;
    int status = -2;
    size_t written = 0;
    if (g->gcry_mpi_scan(&prime, GCRYMPI_FMT_USG, tc_dh_ietf1024_prime, TC_DH_PRIME_BYTES, NULL) != 0) goto done;
    if (base == NULL) {
        b = g->gcry_mpi_set_ui(NULL, 2);
    } else {
        if (g->gcry_mpi_scan(&b, GCRYMPI_FMT_USG, base, base_length, NULL) != 0) { status = -1; goto done; }
        limit = g->gcry_mpi_new(1024);
        g->gcry_mpi_sub_ui(limit, prime, 1);
        if (g->gcry_mpi_cmp_ui(b, 1) <= 0 || g->gcry_mpi_cmp(b, limit) >= 0) { status = -1; goto done; }
    }
    if (g->gcry_mpi_scan(&e, GCRYMPI_FMT_USG, exponent, exponent_length, NULL) != 0) goto done;
    r = g->gcry_mpi_new(1024);
    g->gcry_mpi_powm(r, b, e, prime);
    if (g->gcry_mpi_print(GCRYMPI_FMT_USG, result, TC_DH_PRIME_BYTES, &written, r) != 0 || written > TC_DH_PRIME_BYTES) goto done;
    if (written < TC_DH_PRIME_BYTES) {
        memmove(result + (TC_DH_PRIME_BYTES - written), result, written);
        memset(result, 0, TC_DH_PRIME_BYTES - written);
    }
    status = 0;
done:
    // libgcrypt wipes an MPI's limbs when it frees them.
    g->gcry_mpi_release(prime);
    g->gcry_mpi_release(b);
    g->gcry_mpi_release(e);
    g->gcry_mpi_release(limit);
    g->gcry_mpi_release(r);
    return status;
}

/// HMAC-SHA256 of `data` under `key` into `mac` (32 bytes). Returns 0, or -2.
static inline int tc_hmac_sha256(const TCGcryptFunctions *g, const unsigned char *key, size_t key_length,
                                 const unsigned char *data, size_t data_length, unsigned char mac[32]) {
    gcry_md_hd_t md = NULL;
    if (g->gcry_md_open(&md, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC) != 0) return -2;
    int status = -2;
    if (g->gcry_md_setkey(md, key, key_length) == 0) {
        g->gcry_md_write(md, data, data_length);
        const unsigned char *digest = g->gcry_md_read(md, GCRY_MD_SHA256);
        if (digest != NULL) { memcpy(mac, digest, 32); status = 0; }
    }
    g->gcry_md_close(md);
    return status;
}

/// HKDF-SHA256 (RFC 5869) with no salt (32 zero bytes) and no info, `length` bytes (at most 32)
/// of output. Returns 0, or -2. Intermediate values are wiped.
static inline int tc_hkdf_sha256(const TCGcryptFunctions *g, const unsigned char *input, size_t input_length,
                                 unsigned char *output, size_t length) {
    unsigned char salt[32] = {0}, prk[32], okm[32];
    const unsigned char counter = 1;
    if (length > sizeof okm) return -2;
    int status = tc_hmac_sha256(g, salt, sizeof salt, input, input_length, prk);  // extract
    if (status == 0) status = tc_hmac_sha256(g, prk, sizeof prk, &counter, 1, okm); // expand: T(1)
    if (status == 0) memcpy(output, okm, length);
    explicit_bzero(prk, sizeof prk);
    explicit_bzero(okm, sizeof okm);
    return status;
}

/// The session's AES key: the shared value (`peer` raised to `exponent`, 128 bytes) through
/// HKDF-SHA256, 16 bytes. Returns 0; -1 for an invalid peer public value; -2 when libgcrypt
/// failed. The shared value is wiped.
static inline int tc_transfer_key(const TCGcryptFunctions *g, const unsigned char *peer, size_t peer_length,
                                  const unsigned char *exponent, size_t exponent_length,
                                  unsigned char key[TC_TRANSFER_KEY_BYTES]) {
    unsigned char shared[TC_DH_PRIME_BYTES];
    int status = tc_dh_power(g, peer, peer_length, exponent, exponent_length, shared);
    if (status == 0) status = tc_hkdf_sha256(g, shared, sizeof shared, key, TC_TRANSFER_KEY_BYTES);
    explicit_bzero(shared, sizeof shared);
    return status;
}

/// AES-128-CBC over `buffer` in place (`length` a multiple of 16; padding is the caller's).
/// Returns 0, or -2.
static inline int tc_transfer_cipher(const TCGcryptFunctions *g, int encrypt, const unsigned char key[TC_TRANSFER_KEY_BYTES],
                                     const unsigned char iv[TC_TRANSFER_BLOCK_BYTES], unsigned char *buffer, size_t length) {
    gcry_cipher_hd_t cipher = NULL;
    if (length % TC_TRANSFER_BLOCK_BYTES != 0) return -2;
    if (g->gcry_cipher_open(&cipher, GCRY_CIPHER_AES, GCRY_CIPHER_MODE_CBC, 0) != 0) return -2;
    int status = -2;
    if (g->gcry_cipher_setkey(cipher, key, TC_TRANSFER_KEY_BYTES) == 0
        && g->gcry_cipher_setiv(cipher, iv, TC_TRANSFER_BLOCK_BYTES) == 0) {
        gcry_error_t failed = encrypt ? g->gcry_cipher_encrypt(cipher, buffer, length, NULL, 0)
                                      : g->gcry_cipher_decrypt(cipher, buffer, length, NULL, 0);
        if (failed == 0) status = 0;
    }
    g->gcry_cipher_close(cipher);  // wipes the key schedule
    return status;
}
#endif
