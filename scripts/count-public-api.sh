#!/usr/bin/env bash
# Counts the public declarations of each Swift module of the package, from the symbol graphs
# SwiftPM emits (`swift package dump-symbol-graph`): every public or open symbol a module
# declares, its extensions of other modules' types included; synthesized members (defaults
# inherited from protocols) and `@_spi` symbols left out, as a client sees the API.
# With --check, also fails when any of those symbols is one through which an app could read a
# refresh token's secret or a raw cache entry (the list below), so such API cannot come back, and
# when the modules apps link declare more public symbols than .ci/public-api-budget allows (#45:
# the surface only shrinks unless the budget is raised on purpose, in the same commit).
#   scripts/count-public-api.sh [--check] [MODULE...]    default: the library modules and the CLI's
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
modules=("$@")
if ((${#modules[@]} == 0)); then
    modules=(TokenCacheCore TokenCachePlatform TokenCacheCrypto TokenCacheDBus SecretServiceStore EncryptedFileStore
             SandboxStore TokenCacheHTTP TokenCachePipeline TokenCacheAdmin TokenCacheAgent TokenCache TokenCacheModel TokenCacheCLI)
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
((check)) || exit 0
# The budget: public symbols of the modules in library products apps link.
app_total=0
for module in TokenCacheCore TokenCachePlatform TokenCacheCrypto TokenCacheDBus SecretServiceStore EncryptedFileStore SandboxStore \
              TokenCacheHTTP TokenCachePipeline TokenCache TokenCacheModel; do
    files=()
    for file in "$dir/$module.symbols.json" "$dir/$module@"*.symbols.json; do [ -f "$file" ] && files+=("$file"); done
    ((${#files[@]})) || continue
    app_total=$((app_total + $(jq -s '[.[].symbols[] | select(.accessLevel == "public" or .accessLevel == "open")] | length' "${files[@]}")))
done
budget="$(grep -Ev '^[[:space:]]*(#|$)' .ci/public-api-budget | head -1)"
if ((app_total > budget)); then
    echo "count-public-api.sh: the modules apps link declare $app_total public symbols; the budget (.ci/public-api-budget) is $budget." >&2
    echo "Make the new declarations package or @_spi, or raise the budget on purpose in the same commit." >&2
    exit 1
fi
echo "Public API of the modules apps link: $app_total symbols, within the budget of $budget."
# Symbol paths (Type.member, as the graph names them) that must never be public again.
forbidden='^(RefreshToken\.secret|AccountStore\.(refreshToken|refreshTokens|entries|exportMSALJSON)\(.*|CacheEntry\.(fields|subscript\(_:\)|init\(.*)|JSONValue(\..*)?|JSONObject|CacheRevision\.init\(.*|IDTokenClaims\.all|ExternalStoreAccess\.(read|modify|delete)\(.*|AzureCLIConfiguration(\..*)?)$'
# The modules of the library products, which apps can import (TokenCacheAdmin, TokenCacheAgent and the CLI's are in none).
graphs=()
for module in TokenCacheCore TokenCachePlatform TokenCacheCrypto TokenCacheDBus SecretServiceStore EncryptedFileStore SandboxStore \
              TokenCacheHTTP TokenCachePipeline TokenCache TokenCacheC; do
    for file in "$dir/$module.symbols.json" "$dir/$module@"*.symbols.json; do [ -f "$file" ] && graphs+=("$file"); done
done
public="$(jq -r '.symbols[] | select(.accessLevel == "public" or .accessLevel == "open") | .pathComponents | join(".")' "${graphs[@]}")"
found="$(grep -E "$forbidden" <<<"$public" || true)"
if [ -n "$found" ]; then
    echo "count-public-api.sh: public API that hands out refresh tokens or raw entries:" >&2
    echo "$found" >&2
    exit 1
fi
echo "No public symbol hands out a refresh token or a raw cache entry."
