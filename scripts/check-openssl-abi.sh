#!/usr/bin/env bash
# Checks the OpenSSL declarations in Sources/COpenSSL/shim.h (written by hand, since libcrypto is
# loaded with dlopen and its headers are not needed to build) against OpenSSL's own headers:
# every function in the table must have exactly the real signature, and the constants must have
# the real values. Needs libssl-dev and a C compiler; run it after changing shim.h.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg-config --exists libcrypto || { echo "libssl-dev is not installed; nothing checked" >&2; exit 2; }
CC="${CC:-cc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SHIM="$PWD/Sources/COpenSSL/shim.h"
ASSIGNMENTS="$(grep -o 'TC_RESOLVE([A-Za-z0-9_]*)' "$SHIM" | grep -v 'TC_RESOLVE(name)' | sed 's/TC_RESOLVE(\(.*\))/    table.\1 = \1;/')"

# The real declarations, then the table from shim.h: a signature that differs is an error
# (-Werror), and so is a constant with another value.
cat > "$WORK/check.c" <<C
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include "$SHIM"
_Static_assert(TC_EVP_CTRL_GCM_SET_IVLEN == EVP_CTRL_GCM_SET_IVLEN, "EVP_CTRL_GCM_SET_IVLEN");
_Static_assert(TC_EVP_CTRL_GCM_GET_TAG == EVP_CTRL_GCM_GET_TAG, "EVP_CTRL_GCM_GET_TAG");
_Static_assert(TC_EVP_CTRL_GCM_SET_TAG == EVP_CTRL_GCM_SET_TAG, "EVP_CTRL_GCM_SET_TAG");
_Static_assert(TC_OPENSSL_VERSION == OPENSSL_VERSION, "OPENSSL_VERSION");
int main(void) {
    TCOpenSSLFunctions table;
$ASSIGNMENTS
    return table.OpenSSL_version == NULL;
}
C
# shellcheck disable=SC2046
"$CC" -std=gnu11 -Wall -Werror -o "$WORK/check" "$WORK/check.c" $(pkg-config --cflags --libs libcrypto)
"$WORK/check"
echo "shim.h matches OpenSSL $(pkg-config --modversion libcrypto): $(echo "$ASSIGNMENTS" | wc -l) functions and the constants"
