#!/usr/bin/env bash
# The git credential helper benchmark (#61): `git ls-remote` from the loopback git server of the
# tests (git http-backend behind Tests/TokenCacheTestIdentityProvider/Fixtures/git_server.py)
# with the token from `tokencache git-credential` (cached in the encrypted file) against the same
# with git's plaintext `store` helper holding the same token (the floor). Runs in pairs, the order
# alternating; prints each side's median, the median of the pairwise differences and the spread.
#   scripts/bench-git-credential.sh [PAIRS]          (default 30 pairs)
#   TOKENCACHE_CLI=PATH scripts/bench-git-credential.sh   another tokencache (default: the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS="${1:-30}"
CLI="${TOKENCACHE_CLI:-$(swift build --show-bin-path)/tokencache}"
FIXTURES="$PWD/Tests/TokenCacheTestIdentityProvider/Fixtures"
WORK="$(mktemp -d /tmp/tokencache-bench-git.XXXXXX)"
pids=()
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
export HOME="$WORK/home" XDG_DATA_HOME="$WORK/data" XDG_CONFIG_HOME="$WORK/config" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME" "$XDG_DATA_HOME" "$XDG_CONFIG_HOME"
for name in $(env | sed -n 's/^\(TOKENCACHE_[A-Z_]*\)=.*/\1/p'); do unset "$name"; done
scope="499b84ac-1321-427f-aa17-267ca6975798/.default"
client=aaaaaaaa-0000-0000-0000-000000000001
group=org.swift-tokencache.bench-git

# start NAME ARGS...: a fixture server that prints its port (into $port) and serves until its
# stdin, held open by this shell, closes.
start() {
    local name="$1"; shift
    mkfifo "$WORK/$name.in"
    python3 "$FIXTURES/$name" "$@" < "$WORK/$name.in" > "$WORK/$name.port" &
    pids+=("$!")
    exec {fd}> "$WORK/$name.in"
    until [ -s "$WORK/$name.port" ]; do sleep 0.1; done
    port=$(head -1 "$WORK/$name.port")
}
start fake_idp.py
idp_port=$port
authority="http://127.0.0.1:$idp_port/11111111-1111-1111-1111-111111111111"
git init -q --bare -b main "$WORK/repo.git"
git -C "$WORK/repo.git" -c user.name=b -c user.email=b@example.com commit-tree -m first "$(git -C "$WORK/repo.git" write-tree)" \
    | xargs git -C "$WORK/repo.git" update-ref refs/heads/main
start git_server.py --root "$WORK" --idp "http://127.0.0.1:$idp_port" --scope "$scope"
git_port=$port
url="http://127.0.0.1:$git_port/repo.git"

# Alice signed in (a refresh token the provider knows), then one token for Azure DevOps cached.
curl -sf -X POST "http://127.0.0.1:$idp_port/control" -d "{\"seed\": {\"refresh_token\": \"rt-bench\", \"uid\": \"a11ce\", \"utid\": \"11111111-1111-1111-1111-111111111111\", \"client_id\": \"$client\", \"username\": \"alice@contoso.com\"}}" >/dev/null
python3 - "$WORK/response.json" <<'PY'
import base64, json, sys
b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
tid = "11111111-1111-1111-1111-111111111111"
json.dump({"token_type": "Bearer", "expires_in": 0, "access_token": "at-bench-expired", "refresh_token": "rt-bench", "scope": "User.Read",
           "id_token": b64({"alg": "none"}) + "." + b64({"oid": "a11ce", "tid": tid, "preferred_username": "alice@contoso.com"}) + ".sig",
           "client_info": b64({"uid": "a11ce", "utid": tid})}, open(sys.argv[1], "w"))
PY
"$CLI" save --backend file --group "$group" --client "$client" --authority "$authority" --scopes User.Read < "$WORK/response.json" >/dev/null
token=$("$CLI" token --backend file --group "$group" --client "$client" --authority "$authority" --scopes "$scope")
printf 'http://bench:%s@127.0.0.1:%s\n' "$token" "$git_port" > "$WORK/plaintext-credentials"
chmod 600 "$WORK/plaintext-credentials"

helper="!'$CLI' git-credential --host 127.0.0.1:$git_port --scopes 499b84ac-1321-427f-aa17-267ca6975798/.default --client $client --authority $authority --backend file --group $group"
floor="store --file=$WORK/plaintext-credentials"
# run HELPER: milliseconds for one `git ls-remote` through it.
run() {
    local start end
    start=$(date +%s%N)
    git -c credential.helper= -c "credential.helper=$1" ls-remote "$url" >/dev/null
    end=$(date +%s%N)
    echo $(( (end - start) / 1000 ))
}
run "$helper" >/dev/null; run "$floor" >/dev/null  # warm-up
: > "$WORK/times"
for ((i = 0; i < PAIRS; i++)); do
    if ((i % 2)); then a=$(run "$helper"); b=$(run "$floor"); else b=$(run "$floor"); a=$(run "$helper"); fi
    echo "$a $b" >> "$WORK/times"
done
python3 - "$WORK/times" "$PAIRS" "$("$CLI" --version)" <<'PY'
import statistics, sys
pairs = [tuple(int(x) / 1000 for x in line.split()) for line in open(sys.argv[1])]
helper, floor = [p[0] for p in pairs], [p[1] for p in pairs]
diff = sorted(a - b for a, b in pairs)
q = lambda xs, f: sorted(xs)[int(f * (len(xs) - 1))]
print(f"git ls-remote over loopback smart HTTP, {sys.argv[2]} pairs, order alternating ({sys.argv[3]})")
print(f"  tokencache git-credential: median {statistics.median(helper):.1f} ms (p10 {q(helper, .1):.1f}, p90 {q(helper, .9):.1f})")
print(f"  git credential store (plaintext, the floor): median {statistics.median(floor):.1f} ms (p10 {q(floor, .1):.1f}, p90 {q(floor, .9):.1f})")
print(f"  paired difference: median {statistics.median(diff):+.1f} ms (p10 {q(diff, .1):+.1f}, p90 {q(diff, .9):+.1f})")
PY
