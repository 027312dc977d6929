#!/usr/bin/env bash
# Exercises both SwiftPM plugins the way an app developer uses them: builds
# Examples/TokenCacheExample (whose configuration the build-tool plugin generates from
# tokencache.json), signs a user in for its client ID with `tokencache save`, and checks that
# the app and `swift package tokencache …` (the command plugin) see and clear that sign-in.
# Runs against an encrypted file in a temporary directory; fails on any mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
EXAMPLE=Examples/TokenCacheExample
CLIENT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["clientId"])' "$EXAMPLE/Sources/ExampleApp/tokencache.json")

swift build --product tokencache
swift build --package-path "$EXAMPLE"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export XDG_DATA_HOME="$WORK/data" NO_COLOR=1
unset DBUS_SESSION_BUS_ADDRESS   # the encrypted file, whatever session this runs in
fail() { echo "check-example: $*" >&2; exit 1; }

app_output=$("$EXAMPLE/.build/debug/ExampleApp" 2>&1)
grep -q "^Client $CLIENT," <<<"$app_output" || fail "the app did not get its generated configuration: $app_output"
grep -q "No signed-in accounts." <<<"$app_output" || fail "a fresh cache should be empty: $app_output"

# A token response for the example's client, as its sign-in would save it.
python3 - "$WORK/response.json" <<'PY'
import base64, json, sys, time
b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip("=")
uid, utid = "a1b2c3d4-0000-0000-0000-00000000e001", "72f988bf-86f1-41af-91ab-2d7cd011db47"
claims = {"oid": uid, "tid": utid, "preferred_username": "example.user@contoso.com", "name": "Example User",
          "iss": f"https://login.microsoftonline.com/{utid}/v2.0", "exp": int(time.time()) + 3600}
json.dump({"token_type": "Bearer", "expires_in": 3600, "scope": "User.Read", "foci": "1",
           "access_token": "example-access-token", "refresh_token": "example-refresh-token",
           "id_token": b64({"alg": "none"}) + "." + b64(claims) + ".sig",
           "client_info": b64({"uid": uid, "utid": utid})}, open(sys.argv[1], "w"))
PY
BIN=$(swift build --show-bin-path)
"$BIN/tokencache" save --backend file --client "$CLIENT" --authority https://login.microsoftonline.com/organizations \
    --scopes User.Read --response "$WORK/response.json" >/dev/null

app_output=$("$EXAMPLE/.build/debug/ExampleApp" 2>&1)
grep -q "Signed in: example.user@contoso.com" <<<"$app_output" || fail "the app does not see the saved sign-in: $app_output"

plugin_output=$(swift package --package-path "$EXAMPLE" tokencache list --backend file --json 2>/dev/null)
grep -q '"example.user@contoso.com"' <<<"$plugin_output" || fail "the command plugin did not list the account: $plugin_output"
grep -q "$CLIENT" <<<"$plugin_output" || fail "the command plugin did not scope to the app's client ID: $plugin_output"
! grep -q "example-access-token\|example-refresh-token" <<<"$plugin_output" || fail "list printed a secret"

swift package --package-path "$EXAMPLE" tokencache remove --backend file --account example.user@contoso.com --yes >/dev/null 2>&1
app_output=$("$EXAMPLE/.build/debug/ExampleApp" 2>&1)
grep -q "No signed-in accounts." <<<"$app_output" || fail "the app still sees the account after the plugin signed it out: $app_output"
echo "check-example: both plugins work (configuration generated, command plugin lists and signs out)"
