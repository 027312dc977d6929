#!/usr/bin/env bash
# Checks the hand-copied declarations of the libraries the Secret Service backend loads with
# dlopen (so their headers are not needed to build): libsecret's in Sources/CLibSecret/shim.h
# and libgcrypt's in Sources/CLibSecret/transfer.h. Each header is compiled after the library's
# own, so every function in its table must have exactly the real signature, and the layouts and
# enum values it prints must equal those printed by the header alone. Needs libsecret-1-dev
# (which brings libgcrypt20-dev) and a C compiler; run it after changing either header or when a
# new libsecret or libgcrypt comes out.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg-config --exists libsecret-1 || { echo "libsecret-1-dev is not installed; nothing checked" >&2; exit 2; }
CC="${CC:-cc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# check NAME HEADER TABLE MACRO PRINT REAL_PRELUDE REAL_FLAGS OURS_FLAGS VERSION
#   TABLE: the function table type; MACRO: the resolve macro whose uses list the functions;
#   PRINT: a printf of the layouts and enum values; REAL_PRELUDE: the real header's includes and
#   the define that leaves the header's own copies out.
check() {
    local name="$1" header="$PWD/Sources/CLibSecret/$2" table="$3" macro="$4" print="$5" prelude="$6"
    local real_flags="$7" ours_flags="$8" version="$9"
    local assignments
    assignments="$(grep -o "$macro([a-z_]*)" "$header" | grep -vx "$macro(name)" | sed "s/$macro(\(.*\))/    table.\1 = \1;/")"
    local last="${assignments##*table.}"
    cat > "$WORK/$name-real.c" <<C
#include <stddef.h>
#include <stdio.h>
$prelude
#include "$header"
int main(void) {
    $table table;
$assignments
    $print
    return table.${last%% =*} == NULL;
}
C
    cat > "$WORK/$name-ours.c" <<C
#include <stddef.h>
#include <stdio.h>
#include "$header"
int main(void) { $print return 0; }
C
    # shellcheck disable=SC2086
    "$CC" -std=gnu11 -Wall -Werror -Wno-unused-function -o "$WORK/$name-real" "$WORK/$name-real.c" $real_flags
    # shellcheck disable=SC2086
    "$CC" -std=gnu11 -Wall -Werror -Wno-unused-function -o "$WORK/$name-ours" "$WORK/$name-ours.c" $ours_flags
    local real ours
    real="$("$WORK/$name-real")" ours="$("$WORK/$name-ours")"
    if [ "$real" != "$ours" ]; then
        echo "layouts or enum values differ: $name $real, $2 $ours" >&2
        exit 1
    fi
    echo "$2 matches $name $version: $(echo "$assignments" | wc -l) functions, layouts and values ($ours)"
}

check libsecret shim.h TCLibSecretFunctions TC_RESOLVE \
    'printf("%zu %zu %d %d %d %d\n", sizeof(SecretService), sizeof(SecretCollection), SECRET_SERVICE_NONE,
           SECRET_SERVICE_OPEN_SESSION, SECRET_COLLECTION_NONE, SECRET_COLLECTION_CREATE_NONE);' \
    '#define SECRET_WITH_UNSTABLE 1
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#define TC_CHECK_AGAINST_LIBSECRET_HEADERS' \
    "$(pkg-config --cflags --libs libsecret-1)" "$(pkg-config --cflags --libs gio-2.0)" \
    "$(pkg-config --modversion libsecret-1)"

check libgcrypt transfer.h TCGcryptFunctions TC_RESOLVE_GCRY \
    'printf("%d %d %d %d %d %d %d\n", GCRYCTL_INITIALIZATION_FINISHED, GCRYCTL_INITIALIZATION_FINISHED_P, GCRYMPI_FMT_USG,
           GCRY_CIPHER_AES, GCRY_CIPHER_MODE_CBC, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC);' \
    '#include <gcrypt.h>
#define TC_CHECK_AGAINST_GCRYPT_HEADERS' \
    "-lgcrypt" "" "$(pkg-config --modversion libgcrypt 2>/dev/null || echo '(version unknown)')"
