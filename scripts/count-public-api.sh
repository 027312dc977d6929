#!/usr/bin/env bash
# Counts the public declarations of each Swift module of the package, from the symbol graphs
# SwiftPM emits (`swift package dump-symbol-graph`): every public or open symbol a module
# declares, its extensions of other modules' types included; synthesized members (defaults
# inherited from protocols) and `@_spi` symbols left out, as a client sees the API.
#   scripts/count-public-api.sh [MODULE...]    default: the library modules and the CLI's
set -euo pipefail
cd "$(dirname "$0")/.."
modules=("$@")
if ((${#modules[@]} == 0)); then
    modules=(TokenCacheCore TokenCachePlatform SecretServiceStore EncryptedFileStore SandboxStore
             TokenCacheAdmin TokenCache TokenCacheCLI)
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# Builds the package first; the graphs land in the build folder's symbolgraph/ (emptied first, so
# that a module since removed is not counted).
rm -rf "$(swift build --show-bin-path)/../symbolgraph"
swift package dump-symbol-graph --skip-synthesized-members --minimum-access-level public >"$log" 2>&1 \
    || { cat "$log" >&2; exit 1; }
dir="$(swift build --show-bin-path)/../symbolgraph"
[ -d "$dir" ] || dir="$(sed -n 's/^Files written to //p' "$log" | tail -1)"
total=0
for module in "${modules[@]}"; do
    files=("$dir/$module.symbols.json")
    [ -f "${files[0]}" ] || { printf '%-20s %5s\n' "$module" "-"; continue; }  # no such module here
    for extra in "$dir/$module@"*.symbols.json; do [ -f "$extra" ] && files+=("$extra"); done
    count="$(jq -s '[.[].symbols[] | select(.accessLevel == "public" or .accessLevel == "open")] | length' "${files[@]}")"
    printf '%-20s %5d\n' "$module" "$count"
    total=$((total + count))
done
printf '%-20s %5d\n' "total" "$total"
