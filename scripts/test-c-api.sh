#!/usr/bin/env bash
# The C interface's tests (#30), compiled with the system C compiler and run against a real,
# isolated gnome-keyring (scripts/with-test-keyring.sh):
#   - Tests/CTests/test_capi.c: bad arguments (NULL, invalid UTF-8, malformed or unused group)
#     give status codes, a save/list/find/sign-out/remove round trip, silent acquisition without
#     a refresh token, the accounts watch, the diagnosis, the secret buffer wiped on free (free()
#     interposed), and 10,000 iterations of three calls with the heap in use not growing;
#   - the same program under AddressSanitizer, whose LeakSanitizer fails it on any leak;
#   - interop with the Swift library through the tokencache CLI: saved through C, found by
#     `tokencache token`; saved by `tokencache save`, found through C;
#   - tokencache_sign_in_device_code at the local identity provider (fake_idp.py): approved
#     (found by the CLI; also under AddressSanitizer), denied (TOKENCACHE_E_ACCESS_DENIED); then a
#     claims challenge answered and refused (required claims) under AddressSanitizer;
#   - Examples/c/example.c with no session bus: the fallback to the encrypted file works and the
#     library writes nothing to the app's standard output or error.
#   scripts/test-c-api.sh               against the library scripts/build-c-library.sh builds
#                                       (TOKENCACHE_C_LIBRARY=DIR: one it built already in DIR)
#   scripts/test-c-api.sh --installed   against the installed one (pkg-config, /usr/bin/tokencache)
set -euo pipefail
cd "$(dirname "$0")/.."
CC="${CC:-cc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ "${1:-}" = "--installed" ]; then
    read -r -a cflags <<< "$(pkg-config --cflags --libs tokencache)"
    CLI="${TOKENCACHE_CLI:-$(command -v tokencache)}"
    runtime_path=""
else
    lib="${TOKENCACHE_C_LIBRARY:-$WORK/lib}"
    [ -n "${TOKENCACHE_C_LIBRARY:-}" ] || scripts/build-c-library.sh "$lib" >&2
    lib="$(realpath "$lib")"
    cflags=(-I"$lib/include" -L"$lib/lib" -ltokencache)
    # The CLI from the debug build unless TOKENCACHE_CLI names one.
    [ -n "${TOKENCACHE_CLI:-}" ] || { swift build --product tokencache >&2; TOKENCACHE_CLI="$(swift build --show-bin-path)/tokencache"; }
    CLI="$TOKENCACHE_CLI"
    runtime_path="$lib/lib"
fi
warnings=(-std=c11 -Wall -Wextra -Werror -O1 -g)
"$CC" "${warnings[@]}" -DTOKENCACHE_TEST_WIPE -o "$WORK/test_capi" Tests/CTests/test_capi.c "${cflags[@]}"
"$CC" "${warnings[@]}" -o "$WORK/example" Examples/c/example.c "${cflags[@]}"
"$CC" "${warnings[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$WORK/test_capi_asan" Tests/CTests/test_capi.c "${cflags[@]}"

cat > "$WORK/run.sh" <<'SH'
set -euo pipefail
[ -z "$RUNTIME_PATH" ] || export LD_LIBRARY_PATH="$RUNTIME_PATH"
GROUP=org.example.capi-interop
CLIENT=aaaaaaaa-0000-0000-0000-00000000c0a1
AUTHORITY=https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111
start=$SECONDS
"$WORK/test_capi"
echo "test_capi (wipe hook, heap growth over 10,000 iterations): $((SECONDS - start)) s" >&2
start=$SECONDS
ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0 "$WORK/test_capi_asan"
echo "test_capi under AddressSanitizer/LeakSanitizer: $((SECONDS - start)) s" >&2
# C -> Swift (the CLI).
"$WORK/test_capi" save "$GROUP" c2swift
token="$("$CLI" token --backend secret-service --group "$GROUP" --client "$CLIENT" --scopes User.Read --account carol@contoso.com)"
[ "$token" = "at-capi-c2swift" ] || { echo "FAIL: tokencache token printed '$token' after a save through C" >&2; exit 1; }
# Swift (the CLI) -> C.
cat > "$WORK/response.json" <<JSON
{"token_type":"Bearer","expires_in":3600,"scope":"User.Read Mail.Read","access_token":"at-cli-swift2c","id_token":"eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJhdWQiOiJ4IiwiaXNzIjoiaHR0cHM6Ly9sb2dpbi5taWNyb3NvZnRvbmxpbmUuY29tLzExMTExMTExLTExMTEtMTExMS0xMTExLTExMTExMTExMTExMS92Mi4wIiwic3ViIjoic3ViLWMwZmZlZSIsIm9pZCI6ImMwZmZlZTAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMSIsInRpZCI6IjExMTExMTExLTExMTEtMTExMS0xMTExLTExMTExMTExMTExMSIsInByZWZlcnJlZF91c2VybmFtZSI6ImNhcm9sQGNvbnRvc28uY29tIiwibmFtZSI6IkNhcm9sIEV4YW1wbGUifQ.c2lnbmF0dXJl","refresh_token":"rt-cli","foci":"1","client_info":"eyJ1aWQiOiJjMGZmZWUwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDEiLCJ1dGlkIjoiMTExMTExMTEtMTExMS0xMTExLTExMTEtMTExMTExMTExMTExIn0"}
JSON
"$CLI" save --backend secret-service --group "$GROUP" --client "$CLIENT" --authority "$AUTHORITY" --scopes User.Read --response "$WORK/response.json" >/dev/null
token="$("$WORK/test_capi" find "$GROUP" "$CLIENT" carol@contoso.com "User.Read Mail.Read")"
[ "$token" = "at-cli-swift2c" ] || { echo "FAIL: C found '$token' after tokencache save" >&2; exit 1; }
# Device code sign-in at the local identity provider (Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py,
# alive while its standard input is open): approved, the token is found by the CLI (and again
# under AddressSanitizer/LeakSanitizer); denied, TOKENCACHE_E_ACCESS_DENIED.
start=$SECONDS
coproc IDP { exec python3 Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py; }
read -r port <&"${IDP[0]}"
token="$("$WORK/test_capi" device-code "$GROUP" "$CLIENT" "$port" approve_device)"
# carol is now at two clouds (login.microsoftonline.com above, 127.0.0.1 here): --authority picks this one.
found="$("$CLI" token --backend secret-service --group "$GROUP" --client "$CLIENT" --scopes User.Read --account carol@contoso.com \
    --authority "http://127.0.0.1:$port/11111111-1111-1111-1111-111111111111")"
[ -n "$token" ] && [ "$found" = "$token" ] || { echo "FAIL: device code sign-in through C gave '$token', tokencache token '$found'" >&2; exit 1; }
ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0 "$WORK/test_capi_asan" device-code "$GROUP" "$CLIENT" "$port" approve_device >/dev/null
denied="$("$WORK/test_capi" device-code "$GROUP" "$CLIENT" "$port" deny_device || true)"
[ "$denied" = "TOKENCACHE_E_ACCESS_DENIED" ] || { echo "FAIL: denied device code gave '$denied'" >&2; exit 1; }
# A claims challenge through C under AddressSanitizer/LeakSanitizer (carol's device-code refresh
# token): the decoded claims, the token and, after a refusal asking for claims (AADSTS50076), the
# required claims are all freed; the refusal exits 1 (a leak would exit 23).
header="Bearer error=\"insufficient_claims\", claims=\"$(printf '%s' '{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}' | base64 -w0)\""
ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0 "$WORK/test_capi_asan" claims "$GROUP" "$CLIENT" "$port" cp1 "$header" >/dev/null
python3 -c 'import json, sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=json.dumps({"refresh_interaction_claims": sys.argv[2]}).encode()))' \
    "http://127.0.0.1:$port/control" '{"access_token":{"capolids":{"essential":true}}}'
status=0
required="$(ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0 "$WORK/test_capi_asan" claims "$GROUP" "$CLIENT" "$port" cp1 "$header" 2>/dev/null)" || status=$?
[ "$status" = 1 ] && [ "$required" = 'required_claims {"access_token":{"capolids":{"essential":true}}}' ] \
    || { echo "FAIL: a refused claims challenge through C exited $status and printed '$required'" >&2; exit 1; }
eval "exec ${IDP[1]}>&-"
wait "$IDP_PID"
echo "device code sign-in through C (approved, found by the CLI, under ASan; denied), a claims challenge and its refusal under ASan: $((SECONDS - start)) s" >&2
# No session bus: the automatic policy falls back to the encrypted file, and the library says
# nothing on the app's standard output or error (the example prints only its own lines).
mkdir -p "$WORK/nobus"
env -u DBUS_SESSION_BUS_ADDRESS HOME="$WORK/nobus" XDG_DATA_HOME="$WORK/nobus/data" \
    "$WORK/example" > "$WORK/nobus.out" 2> "$WORK/nobus.err"
grep -qx "0 account(s)" "$WORK/nobus.out" || { echo "FAIL: example without a bus:" >&2; cat "$WORK/nobus.out" "$WORK/nobus.err" >&2; exit 1; }
[ ! -s "$WORK/nobus.err" ] && [ "$(wc -l < "$WORK/nobus.out")" = 2 ] || { echo "FAIL: the library wrote to the app's output:" >&2; cat "$WORK/nobus.out" "$WORK/nobus.err" >&2; exit 1; }
echo "interop: saved through C, found by tokencache token; saved by tokencache save, found through C" >&2
SH
WORK="$WORK" CLI="$CLI" RUNTIME_PATH="$runtime_path" scripts/with-test-keyring.sh bash "$WORK/run.sh"
