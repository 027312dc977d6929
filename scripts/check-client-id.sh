#!/usr/bin/env bash
# The client ID is checked once where it enters and carried as a ClientID to the store (#58 item 3):
#   - no ClientID checked and dropped in Sources (`_ = try ClientID(`, `_ = try? …`, `let _ = …`,
#     `(try? ClientID(x)) != nil`) nor turned straight back into text (`ClientID(x).value`):
#     either leaves a String to carry on;
#   - no declaration of a client ID as text (`client`, `clients`, `clientId`, `clientID`,
#     `clientIds` or `clientIDs` typed `String`, `String?` or `[String]`) in Sources outside
#     .ci/clientid-string-allowlist, which names the public-edge, wire and stored-data
#     declarations that keep a String, with why;
#   - every command-line option holding client IDs (`@Option … var client…`) is parsed at the
#     edge into ClientID (`transform: ClientIDArgument.parse`): no allowlist.
# An allowlist line is `path:symbol  # reason`; symbol is the declaration the line belongs to (its
# func, init, var, let or case name, or the nearest one above for a parameter on a later line).
# Exits 1 naming each offending line.
#   scripts/check-client-id.sh
set -euo pipefail
cd "$(dirname "$0")/.."
allowlist=.ci/clientid-string-allowlist
status=0

discarded="$(grep -rnE --include='*.swift' '(^|[^A-Za-z0-9_])(let[[:space:]]+)?_[[:space:]]*=[[:space:]]*try[?!]?[[:space:]]+ClientID\(|\(try\?[[:space:]]+ClientID\([^)]*\)\)[[:space:]]*[!=]=[[:space:]]*nil|ClientID\([^()]*\)\)?\.value' Sources || true)"
if [ -n "$discarded" ]; then
    echo "check-client-id: a ClientID checked and dropped (carry the checked value instead):" >&2
    sed 's/^/    /' <<<"$discarded" >&2
    status=1
fi

# Every declaration of a client ID as text outside comments, as `path:line:symbol`.
declarations="$(find Sources -name '*.swift' -print0 | sort -z | xargs -0 awk '
    FNR == 1 { symbol = "" }
    /^[[:space:]]*\/\// { next }
    {
        if (match($0, /(func|var|let|case)[[:space:]]+[A-Za-z_][A-Za-z0-9_]*/)) {
            decl = substr($0, RSTART, RLENGTH); sub(/^[a-z]+[[:space:]]+/, "", decl); symbol = decl
        } else if (match($0, /(^|[^A-Za-z0-9_.])init[?!]?[(<]/)) {
            symbol = "init"
        }
    }
    /(^|[^A-Za-z0-9_.])(client|clients|clientId|clientID|clientIds|clientIDs)[[:space:]]*:[[:space:]]*\[?String\]?([^A-Za-z0-9_]|$)/ { print FILENAME ":" FNR ":" symbol }
')"
while IFS=: read -r file line symbol; do
    [ -n "$file" ] || continue
    if ! awk -v key="$file:$symbol" '!/^[[:space:]]*(#|$)/ && $1 == key { found = 1 } END { exit !found }' "$allowlist"; then
        echo "check-client-id: $file:$line ($symbol) declares a client ID as text and is not in $allowlist:" >&2
        sed -n "${line}p" "$file" | sed 's/^[[:space:]]*/    /' >&2
        status=1
    fi
done <<<"$declarations"
# An option's property is the first `var` after its `@Option` (its arguments may take lines).
options="$(find Sources -name '*.swift' -print0 | sort -z | xargs -0 awk '
    FNR == 1 { option = 0 }
    /^[[:space:]]*\/\// { next }
    /@Option/ { option = 1 }
    option && /(^|[^A-Za-z0-9_])var[[:space:]]/ {
        option = 0
        if ($0 ~ /var[[:space:]]+client(s|I[dD]|I[dD]s)?[[:space:]]*:/ && $0 !~ /:[[:space:]]*\[?ClientID\]?[?!]?([[:space:]=]|$)/) print FILENAME ":" FNR
    }
')"
if [ -n "$options" ]; then
    echo "check-client-id: a --client option kept as text (parse it where it enters: transform: ClientIDArgument.parse):" >&2
    while IFS=: read -r file line; do echo "    $file:$line: $(sed -n "${line}p" "$file" | sed 's/^[[:space:]]*//')" >&2; done <<<"$options"
    status=1
fi
if [ "$status" != 0 ]; then
    echo "  carry the ClientID checked at the edge; a public edge, wire field or stored entry that keeps a String goes in $allowlist with its reason" >&2
fi
exit "$status"
