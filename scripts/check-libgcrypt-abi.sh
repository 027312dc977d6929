#!/usr/bin/env bash
# Checks the hand-copied declarations of libgcrypt, which the Secret Service backend loads with
# dlopen (so its header is not needed to build), in Sources/CGcrypt/transfer.h: the header is
# compiled after libgcrypt's own, so every function in its table must have exactly the real
# signature, and the enum values it prints must equal those printed by the header alone. Needs
# libgcrypt20-dev and a C compiler; run it after changing the header or when a new libgcrypt
# comes out. (libsecret is not used, so it has no declarations to check.)
set -euo pipefail
cd "$(dirname "$0")/.."
CC="${CC:-cc}"
echo "#include <gcrypt.h>" | "$CC" -E -x c - >/dev/null 2>&1 || { echo "libgcrypt20-dev is not installed; nothing checked" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# check NAME HEADER TABLE MACRO PRINT REAL_PRELUDE REAL_FLAGS OURS_FLAGS VERSION
#   TABLE: the function table type; MACRO: the resolve macro whose uses list the functions;
#   PRINT: a printf of the layouts and enum values; REAL_PRELUDE: the real header's includes and
#   the define that leaves the header's own copies out.
check() {
    local name="$1" header="$PWD/Sources/CGcrypt/$2" table="$3" macro="$4" print="$5" prelude="$6"
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

check libgcrypt transfer.h TCGcryptFunctions TC_RESOLVE_GCRY \
    'printf("%d %d %d %d %d %d %d\n", GCRYCTL_INITIALIZATION_FINISHED, GCRYCTL_INITIALIZATION_FINISHED_P, GCRYMPI_FMT_USG,
           GCRY_CIPHER_AES, GCRY_CIPHER_MODE_CBC, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC);' \
    '#include <gcrypt.h>
#define TC_CHECK_AGAINST_GCRYPT_HEADERS' \
    "-lgcrypt" "" "$(pkg-config --modversion libgcrypt 2>/dev/null || echo '(version unknown)')"
