#!/usr/bin/env bash
# The C interface's ABI check: what libtokencache.so exports (names and symbol versions), the
# prototype tokencache.h gives each of them, the values of its constants and the layout of
# tokencache_error, against the committed list Sources/TokenCacheC/tokencache.symbols.
# A removed or changed line fails; so does a new one until it is committed (run with --update
# after adding a function, under a new version node). Also fails when the library exports
# anything but tokencache_* (the version script keeps the Swift runtime and library local).
#   scripts/check-c-abi.sh [--update] [LIBRARY]    default .build/c-library/lib/libtokencache.so.0
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
LIB="${1:-.build/c-library/lib/libtokencache.so.0}"
[ -f "$LIB" ] || { echo "check-c-abi.sh: no library at $LIB (run scripts/build-c-library.sh)" >&2; exit 1; }
HEADER=Sources/CTokenCache/include/tokencache.h
LIST=Sources/TokenCacheC/tokencache.symbols
CC="${CC:-cc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Exported (global, defined) dynamic symbols with their versions.
nm -D -g --defined-only --with-symbol-versions "$LIB" | awk '{ print $3 }' | sort > "$WORK/exported"
leaks="$(grep -v -e '^tokencache_' -e '^TOKENCACHE_[0-9.]*$' "$WORK/exported" || true)"
if [ -n "$leaks" ]; then
    echo "check-c-abi.sh: $LIB exports symbols outside the C interface:" >&2
    printf '%s\n' "$leaks" | sed -n 1,20p >&2  # sed reads to the end: no early exit under pipefail
    exit 1
fi

# The header's prototypes (parameter names dropped), its constants, and the error struct's layout.
python3 - "$HEADER" "$WORK/exported" > "$WORK/current" <<'PY'
import re, sys
header = re.sub(r'/\*.*?\*/', '', open(sys.argv[1]).read(), flags=re.S)
prototypes = {}
for ret, name, params in re.findall(r'^([A-Za-z_][\w ]*?[\s*]+?)(tokencache_\w+)\(([^;{]*?)\);', header, re.M | re.S):
    ret = re.sub(r'\s+', ' ', ret).strip().replace(' *', '*').replace('*', ' *').replace('  ', ' ')
    kinds = []
    for param in params.split(','):
        param = re.sub(r'\s+', ' ', param).strip()
        if param != 'void':
            param = re.sub(r'\s*\b\w+$', '', param)
        kinds.append(param)
    prototypes[name] = f"{ret} ({', '.join(kinds)})"
missing = []
for line in open(sys.argv[2]).read().split():
    name, _, version = line.partition('@@')
    if not version:
        print(f"version-node {name}")
        continue
    if name not in prototypes:
        missing.append(name)
        continue
    print(f"function {name}@@{version} {prototypes.pop(name)}")
for name in prototypes:
    print(f"unexported-declaration {name}")
for name in missing:
    print(f"undeclared-export {name}")
PY
grep -o '^ *TOKENCACHE_[A-Z_]* = [0-9]*' "$HEADER" | awk '{ print $1 }' > "$WORK/constants"
{
    echo '#include <stdio.h>'
    echo '#include <stddef.h>'
    echo "#include \"$PWD/$HEADER\""
    echo 'int main(void) {'
    while read -r constant; do echo "    printf(\"constant $constant %d\\n\", (int)$constant);"; done < "$WORK/constants"
    for value in TOKENCACHE_FORCE_REFRESH TOKENCACHE_BROKER_NEVER TOKENCACHE_BROKER_WHEN_AVAILABLE TOKENCACHE_BROKER_ALWAYS; do
        echo "    printf(\"constant $value %d\\n\", (int)$value);"
    done
    echo '    printf("layout tokencache_error size %zu code %zu message %zu hint %zu\n", sizeof(tokencache_error),'
    echo '           offsetof(tokencache_error, code), offsetof(tokencache_error, message), offsetof(tokencache_error, hint));'
    echo '    return 0;'
    echo '}'
} > "$WORK/layout.c"
"$CC" -std=c11 -Wall -Werror -o "$WORK/layout" "$WORK/layout.c"
"$WORK/layout" >> "$WORK/current"
sort -o "$WORK/current" "$WORK/current"
if grep -q '^\(unexported-declaration\|undeclared-export\)' "$WORK/current"; then
    echo "check-c-abi.sh: the header and the library disagree:" >&2
    grep '^\(unexported-declaration\|undeclared-export\)' "$WORK/current" >&2
    exit 1
fi

if ((update)); then
    { echo "# The C ABI of libtokencache.so.0, checked by scripts/check-c-abi.sh: never remove or change a line."
      cat "$WORK/current"; } > "$LIST"
    echo "Wrote $LIST ($(grep -c . "$WORK/current") lines)"
    exit 0
fi
grep -v '^#' "$LIST" | sort > "$WORK/committed"
removed="$(comm -23 "$WORK/committed" "$WORK/current")"
added="$(comm -13 "$WORK/committed" "$WORK/current")"
if [ -n "$removed" ]; then
    echo "check-c-abi.sh: ABI break: these committed lines are gone or changed:" >&2
    echo "$removed" >&2
    [ -z "$added" ] || { echo "now:" >&2; echo "$added" >&2; }
    exit 1
fi
if [ -n "$added" ]; then
    echo "check-c-abi.sh: new in the ABI, not yet in $LIST (commit them: scripts/check-c-abi.sh --update):" >&2
    echo "$added" >&2
    exit 1
fi
echo "C ABI matches $LIST: $(grep -c '^function' "$WORK/current") functions, $(grep -c '^constant' "$WORK/current") constants, tokencache_error layout"
