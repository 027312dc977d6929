#!/usr/bin/env bash
# Checks the libsecret declarations in Sources/CLibSecret/shim.h (copied by hand, since libsecret
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
LAYOUT='printf("%zu %zu %zu %zu %zu %d %d %d %d %d\n", sizeof(SecretSchema), offsetof(SecretSchema, attributes),
           offsetof(SecretSchema, reserved), sizeof(SecretService), sizeof(SecretCollection),
           SECRET_SCHEMA_NONE, SECRET_SCHEMA_ATTRIBUTE_STRING, SECRET_SERVICE_OPEN_SESSION,
           SECRET_COLLECTION_NONE, SECRET_COLLECTION_CREATE_NONE);'
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
    return table.secret_value_get == NULL;
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
