#!/usr/bin/env bash
# Checks the libsecret declarations in Sources/CLibSecret/shim.h (and libgcrypt's in transfer.h) (copied by hand, since libsecret
# is loaded with dlopen and its headers are not needed to build) against libsecret's own headers:
# every function in the table must have exactly the real signature, and the struct layouts and
# enum values must match. Needs libsecret-1-dev and a C compiler; run it after changing shim.h
# or when a new libsecret comes out.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg-config --exists libsecret-1 || { echo "libsecret-1-dev is not installed; nothing checked" >&2; exit 2; }
CC="${CC:-cc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SHIM="$PWD/Sources/CLibSecret/shim.h"
LAYOUT='printf("%zu %zu %d %d %d %d\n", sizeof(SecretService), sizeof(SecretCollection), SECRET_SERVICE_NONE,
           SECRET_SERVICE_OPEN_SESSION, SECRET_COLLECTION_NONE, SECRET_COLLECTION_CREATE_NONE);'
ASSIGNMENTS="$(grep -o 'TC_RESOLVE(secret_[a-z_]*)' "$SHIM" | sed 's/TC_RESOLVE(\(.*\))/    table.\1 = \1;/')"

# The real declarations, then the table from shim.h: any signature that differs is an error.
cat > "$WORK/real.c" <<C
#define SECRET_WITH_UNSTABLE 1
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <stddef.h>
#include <stdio.h>
#include <libsecret/secret.h>
#define TC_CHECK_AGAINST_LIBSECRET_HEADERS
#include "$SHIM"
int main(void) {
    TCLibSecretFunctions table;
$ASSIGNMENTS
    $LAYOUT
    return table.secret_collection_create_sync == NULL;
}
C
# shim.h alone: its own layouts.
cat > "$WORK/ours.c" <<C
#include <stddef.h>
#include <stdio.h>
#include "$SHIM"
int main(void) { $LAYOUT return 0; }
C
# shellcheck disable=SC2046
"$CC" -std=gnu11 -Wall -Werror -o "$WORK/real" "$WORK/real.c" $(pkg-config --cflags --libs libsecret-1)
# shellcheck disable=SC2046
"$CC" -std=gnu11 -Wall -Werror -o "$WORK/ours" "$WORK/ours.c" $(pkg-config --cflags --libs gio-2.0)
real="$("$WORK/real")" ours="$("$WORK/ours")"
if [ "$real" != "$ours" ]; then
    echo "layouts or enum values differ: libsecret $real, shim.h $ours" >&2
    exit 1
fi
echo "shim.h matches libsecret $(pkg-config --modversion libsecret-1): $(echo "$ASSIGNMENTS" | wc -l) functions, layouts ($ours)"

# transfer.h against libgcrypt's gcrypt.h (libsecret-1-dev depends on libgcrypt20-dev): the same
# two ways, for the function table and the enum values.
TRANSFER="$PWD/Sources/CLibSecret/transfer.h"
GCRY_ASSIGNMENTS="$(grep -o 'TC_RESOLVE_GCRY(gcry_[a-z_]*)' "$TRANSFER" | grep -v '(name)' | sed 's/TC_RESOLVE_GCRY(\(.*\))/    table.\1 = \1;/')"
GCRY_VALUES='printf("%d %d %d %d %d %d %d\n", GCRYCTL_INITIALIZATION_FINISHED, GCRYCTL_INITIALIZATION_FINISHED_P, GCRYMPI_FMT_USG,
           GCRY_CIPHER_AES, GCRY_CIPHER_MODE_CBC, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC);'
cat > "$WORK/gcrypt-real.c" <<C
#include <stdio.h>
#include <gcrypt.h>
#define TC_CHECK_AGAINST_GCRYPT_HEADERS
#include "$TRANSFER"
int main(void) {
    TCGcryptFunctions table;
$GCRY_ASSIGNMENTS
    $GCRY_VALUES
    return table.gcry_cipher_close == NULL;
}
C
cat > "$WORK/gcrypt-ours.c" <<C
#include <stdio.h>
#include "$TRANSFER"
int main(void) { $GCRY_VALUES return 0; }
C
"$CC" -std=gnu11 -Wall -Werror -Wno-unused-function -o "$WORK/gcrypt-real" "$WORK/gcrypt-real.c" -lgcrypt
"$CC" -std=gnu11 -Wall -Werror -Wno-unused-function -o "$WORK/gcrypt-ours" "$WORK/gcrypt-ours.c"
real="$("$WORK/gcrypt-real")" ours="$("$WORK/gcrypt-ours")"
if [ "$real" != "$ours" ]; then
    echo "enum values differ: gcrypt.h $real, transfer.h $ours" >&2
    exit 1
fi
echo "transfer.h matches libgcrypt $(pkg-config --modversion libgcrypt 2>/dev/null || echo '(version unknown)'): $(echo "$GCRY_ASSIGNMENTS" | wc -l) functions, enum values ($ours)"
