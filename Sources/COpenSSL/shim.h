#ifndef TOKENCACHE_COPENSSL_SHIM_H
#define TOKENCACHE_COPENSSL_SHIM_H
// OpenSSL's libcrypto is not linked: it is loaded at run time with dlopen when the encrypted
// file is first used (see LibCrypto.swift). Linked, it is mapped and relocated (21,000
// relocations) in every process at start-up: 0.5 ms and 1.6 MB of a command-line lookup on the
// Secret Service, which never uses it. Building needs no OpenSSL headers: the part of
// libcrypto 3's stable ABI the encrypted file uses is declared here, with the values of
// openssl/evp.h and openssl/crypto.h. scripts/check-openssl-abi.sh checks these declarations
// against the real headers.
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// Opaque OpenSSL types, under OpenSSL's own struct tags (so the declarations are compatible).
typedef struct evp_cipher_ctx_st TCCipherContext;
typedef struct evp_cipher_st TCCipher;
typedef struct evp_md_st TCDigest;
typedef struct engine_st TCEngine;
typedef struct ossl_lib_ctx_st TCLibraryContext;

// EVP_CIPHER_CTX_ctrl commands for GCM (EVP_CTRL_AEAD_*), and OpenSSL_version's OPENSSL_VERSION.
enum {
    TC_EVP_CTRL_GCM_SET_IVLEN = 0x9,
    TC_EVP_CTRL_GCM_GET_TAG = 0x10,
    TC_EVP_CTRL_GCM_SET_TAG = 0x11,
    TC_OPENSSL_VERSION = 0,
};

/// The functions the encrypted file calls, resolved with dlsym once.
typedef struct {
    TCCipherContext *(*EVP_CIPHER_CTX_new)(void);
    void (*EVP_CIPHER_CTX_free)(TCCipherContext *context);
    int (*EVP_CIPHER_CTX_ctrl)(TCCipherContext *context, int type, int argument, void *pointer);
    const TCCipher *(*EVP_aes_256_gcm)(void);
    TCCipher *(*EVP_CIPHER_fetch)(TCLibraryContext *context, const char *algorithm, const char *properties);
    int (*EVP_EncryptInit_ex)(TCCipherContext *context, const TCCipher *cipher, TCEngine *engine,
                              const unsigned char *key, const unsigned char *iv);
    int (*EVP_EncryptUpdate)(TCCipherContext *context, unsigned char *out, int *outLength,
                             const unsigned char *in, int inLength);
    int (*EVP_EncryptFinal_ex)(TCCipherContext *context, unsigned char *out, int *outLength);
    int (*EVP_DecryptInit_ex)(TCCipherContext *context, const TCCipher *cipher, TCEngine *engine,
                              const unsigned char *key, const unsigned char *iv);
    int (*EVP_DecryptUpdate)(TCCipherContext *context, unsigned char *out, int *outLength,
                             const unsigned char *in, int inLength);
    int (*EVP_DecryptFinal_ex)(TCCipherContext *context, unsigned char *out, int *outLength);
    int (*EVP_Digest)(const void *data, size_t count, unsigned char *digest, unsigned int *size,
                      const TCDigest *type, TCEngine *engine);
    const TCDigest *(*EVP_sha256)(void);
    int (*EVP_PBE_scrypt)(const char *passphrase, size_t passphraseLength, const unsigned char *salt,
                          size_t saltLength, uint64_t n, uint64_t r, uint64_t p, uint64_t maxMemory,
                          unsigned char *key, size_t keyLength);
    int (*RAND_bytes)(unsigned char *buffer, int count);
    unsigned long (*ERR_get_error)(void);
    void (*ERR_error_string_n)(unsigned long error, char *buffer, size_t length);
    void (*ERR_clear_error)(void);
    const char *(*OpenSSL_version)(int type);
    // The libsecret/oo7 file keyring (SandboxStore): PBKDF2-HMAC-SHA256, HMAC-SHA256, AES-128-CBC.
    int (*PKCS5_PBKDF2_HMAC)(const char *passphrase, int passphraseLength, const unsigned char *salt, int saltLength,
                             int iterations, const TCDigest *digest, int keyLength, unsigned char *out);
    unsigned char *(*HMAC)(const TCDigest *digest, const void *key, int keyLength, const unsigned char *data,
                           size_t dataLength, unsigned char *mac, unsigned int *macLength);
    const TCCipher *(*EVP_aes_128_cbc)(void);
    int (*CRYPTO_memcmp)(const void *a, const void *b, size_t length);
} TCOpenSSLFunctions;

/// Resolves every function; returns the name of the first one missing, or NULL.
static inline const char *tc_openssl_resolve(void *library, TCOpenSSLFunctions *functions) {
#define TC_RESOLVE(name) \
    if (!(*(void **)&functions->name = dlsym(library, #name))) return #name;
    TC_RESOLVE(EVP_CIPHER_CTX_new)
    TC_RESOLVE(EVP_CIPHER_CTX_free)
    TC_RESOLVE(EVP_CIPHER_CTX_ctrl)
    TC_RESOLVE(EVP_aes_256_gcm)
    TC_RESOLVE(EVP_CIPHER_fetch)
    TC_RESOLVE(EVP_EncryptInit_ex)
    TC_RESOLVE(EVP_EncryptUpdate)
    TC_RESOLVE(EVP_EncryptFinal_ex)
    TC_RESOLVE(EVP_DecryptInit_ex)
    TC_RESOLVE(EVP_DecryptUpdate)
    TC_RESOLVE(EVP_DecryptFinal_ex)
    TC_RESOLVE(EVP_Digest)
    TC_RESOLVE(EVP_sha256)
    TC_RESOLVE(EVP_PBE_scrypt)
    TC_RESOLVE(RAND_bytes)
    TC_RESOLVE(ERR_get_error)
    TC_RESOLVE(ERR_error_string_n)
    TC_RESOLVE(ERR_clear_error)
    TC_RESOLVE(OpenSSL_version)
    TC_RESOLVE(PKCS5_PBKDF2_HMAC)
    TC_RESOLVE(HMAC)
    TC_RESOLVE(EVP_aes_128_cbc)
    TC_RESOLVE(CRYPTO_memcmp)
#undef TC_RESOLVE
    return NULL;
}

/// Zeroes memory in a way the compiler may not remove (glibc's explicit_bzero): keys and
/// plaintext are wiped without loading libcrypto for its OPENSSL_cleanse.
static inline void tc_cleanse(void *pointer, size_t length) {
    if (pointer != NULL && length > 0) explicit_bzero(pointer, length);
}

#endif
