#!/usr/bin/env bash
# Checks the tpm2-tss declarations in Sources/CTSS2/shim.h (written by hand, since libtss2-esys and
# libtss2-tctildr are loaded with dlopen and their headers are not needed to build) against
# tpm2-tss's own headers: every function in the tables must have exactly the real signature, and
# the constants, sizes and offsets must have the real values. Needs libtss2-dev and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg-config --exists tss2-esys tss2-tctildr tss2-mu || { echo "libtss2-dev is not installed; nothing checked" >&2; exit 2; }
CC="${CC:-cc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SHIM="$PWD/Sources/CTSS2/shim.h"
# The functions of each table, from its resolve function: "table.NAME = NAME;" lines.
assignments() {
    sed -n "/$1(void \*library/,/^}/p" "$SHIM" | grep -o 'TC_RESOLVE([A-Za-z0-9_]*)' | sed "s/TC_RESOLVE(\(.*\))/    $2.\1 = \1;/"
}
ESYS="$(assignments tc_esys_resolve esys)"
TCTILDR="$(assignments tc_tctildr_resolve tctildr)"

cat > "$WORK/check.c" <<C
#include <stddef.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tctildr.h>
#include "$SHIM"
#define SAME(shim, real) _Static_assert((shim) == (real), #real);
SAME(TC_ESYS_TR_NONE, ESYS_TR_NONE)
SAME(TC_ESYS_TR_PASSWORD, ESYS_TR_PASSWORD)
SAME(TC_ESYS_TR_RH_OWNER, ESYS_TR_RH_OWNER)
SAME(TC_SIZEOF_TPM2B_PUBLIC, sizeof(TPM2B_PUBLIC))
SAME(TC_SIZEOF_TPM2B_PRIVATE, sizeof(TPM2B_PRIVATE))
SAME(TC_SIZEOF_TPM2B_SENSITIVE_CREATE, sizeof(TPM2B_SENSITIVE_CREATE))
SAME(TC_TPM2B_SENSITIVE_DATA_BUFFER_OFFSET, offsetof(TPM2B_SENSITIVE_DATA, buffer))
SAME(TC_TPM2_MAX_SYM_DATA, sizeof(((TPM2B_SENSITIVE_DATA *)0)->buffer))
SAME(TC_TPM2_RC_FMT1, TPM2_RC_FMT1)
SAME(TC_TPM2_RC_INTEGRITY, TPM2_RC_INTEGRITY)
SAME(TC_TPM2_RC_BAD_AUTH, TPM2_RC_BAD_AUTH)
SAME(TC_TPM2_RC_AUTH_FAIL, TPM2_RC_AUTH_FAIL)
SAME(TC_TPM2_RC_OBJECT_MEMORY, TPM2_RC_OBJECT_MEMORY)
SAME(TC_TPM2_RC_MEMORY, TPM2_RC_MEMORY)
SAME(TC_TPM2_RC_YIELDED, TPM2_RC_YIELDED)
SAME(TC_TPM2_RC_TESTING, TPM2_RC_TESTING)
SAME(TC_TPM2_RC_NV_RATE, TPM2_RC_NV_RATE)
SAME(TC_TPM2_RC_LOCKOUT, TPM2_RC_LOCKOUT)
SAME(TC_TPM2_RC_RETRY, TPM2_RC_RETRY)
SAME(TC_TSS2_RC_LAYER_MASK, TSS2_RC_LAYER_MASK)
SAME(TC_TSS2_TCTI_RC_LAYER, TSS2_TCTI_RC_LAYER)
SAME(TC_TSS2_RESMGR_TPM_RC_LAYER, TSS2_RESMGR_TPM_RC_LAYER)
SAME(TC_TPM2_CAP_TPM_PROPERTIES, TPM2_CAP_TPM_PROPERTIES)
SAME(TC_TPM2_PT_MANUFACTURER, TPM2_PT_MANUFACTURER)
// The zeroed stand-in for empty inputs (TPM2B_DATA, TPML_PCR_SELECTION, TPM2B_SENSITIVE_CREATE) is 1024 bytes.
_Static_assert(sizeof(TPM2B_DATA) <= 1024 && sizeof(TPML_PCR_SELECTION) <= 1024 && sizeof(TPM2B_SENSITIVE_CREATE) <= 1024, "empty input");
int main(void) {
    TCEsysFunctions esys;
    TCTctiLdrFunctions tctildr;
$ESYS
$TCTILDR
    return esys.Esys_Initialize == NULL || tctildr.Tss2_TctiLdr_Initialize == NULL;
}
C
# shellcheck disable=SC2046
"$CC" -std=gnu11 -Wall -Werror -o "$WORK/check" "$WORK/check.c" $(pkg-config --cflags --libs tss2-esys tss2-tctildr tss2-mu)
"$WORK/check"
echo "CTSS2/shim.h matches tpm2-tss $(pkg-config --modversion tss2-esys): $(printf "%s\n%s\n" "$ESYS" "$TCTILDR" | grep -c " = ") functions and the constants"
