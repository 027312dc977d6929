#!/usr/bin/env bash
# Runs a command where the real Microsoft authentication runtime (pymsalruntime, which brings its own
# HTTP stack and reads the system's CA bundle) reaches the local identity provider instead of Entra,
# without touching this machine's trust store, /etc/hosts or network:
#   scripts/with-broker-harness.sh COMMAND...
# - private mount and network namespaces (unshare; root, or sudo): only loopback exists, so nothing
#   reaches the network; mounts made here vanish with the namespace;
# - a hosts file mapping Entra's hosts (HOSTS below) to 127.0.0.1, bind-mounted over /etc/hosts;
# - a test CA and a server certificate for those hosts, made with openssl for this run only (no key
#   is committed or kept); the system CA bundle plus the test CA bind-mounted over the bundle path
#   libcurl, OpenSSL and so the runtime read (/etc/ssl/certs/ca-certificates.crt);
# - the project's local identity provider (Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py,
#   Entra's endpoints) on https://login.microsoftonline.com (127.0.0.1:443) and on a plain-http
#   loopback port for its /control and /stats;
# - then scripts/with-test-keyring.sh: a private session bus with gnome-keyring and a temporary HOME.
# A script, not a test fixture: the namespaces must hold every process of the run (the test runner, the
# bus, `tokencache broker`, MSAL apps, the provider) from before the bus starts, and the benchmark and a
# person debugging use the same environment.
# The command sees TOKENCACHE_TEST_IDP (the provider's http://127.0.0.1:PORT), TOKENCACHE_TEST_CA (the
# test CA's certificate), TOKENCACHE_TEST_IDP_UNSERVED (the provider's log of requests it had no
# endpoint for) and REQUESTS_CA_BUNDLE (the combined bundle, for Python's requests, which has its own).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
(($#)) || { echo "usage: $0 COMMAND..." >&2; exit 2; }
# Entra's hosts, mapped to the provider. strace of MSAL Python 1.39 with pymsalruntime 0.20.7 (sign-in,
# silent, forced refresh): the only connection is MSAL Python's own discovery at the authority's host
# (the runtime itself connects nowhere: it asks the broker); tokencache redeems refresh tokens there too.
# The aliases are MSAL's for the same cloud (the namespace has no network, so nothing else is reached).
HOSTS="login.microsoftonline.com login.windows.net login.microsoft.com sts.windows.net"
BUNDLE=/etc/ssl/certs/ca-certificates.crt

if [ "${TOKENCACHE_BROKER_HARNESS:-}" != inside ]; then
    if [ "$(id -u)" -ne 0 ]; then exec sudo --preserve-env "$0" "$@"; fi
    exec env TOKENCACHE_BROKER_HARNESS=inside unshare --mount --net --propagation private -- "$0" "$@"
fi

mount --make-rprivate /
ip link set lo up
WORK="$(mktemp -d /tmp/tokencache-broker.XXXXXX)"
idp=""
cleanup() {
    exec 3>&- 2>/dev/null || true
    if [ -n "$idp" ]; then kill "$idp" 2>/dev/null || true; wait "$idp" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# The test CA and the hosts' certificate (EC P-256, one day).
openssl_quiet() { openssl "$@" 2>"$WORK/openssl.log" || { cat "$WORK/openssl.log" >&2; exit 1; }; }
openssl_quiet req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=tokencache broker harness test CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$WORK/ca.key" -out "$WORK/ca.pem"
san="$(printf 'DNS:%s,' $HOSTS)IP:127.0.0.1"
openssl_quiet req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=login.microsoftonline.com" -keyout "$WORK/server.key" -out "$WORK/server.csr"
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$san" >"$WORK/server.ext"
openssl_quiet x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 1 -extfile "$WORK/server.ext" -out "$WORK/server.pem"
rm -f "$WORK/ca.key" "$WORK/server.csr"  # nothing can sign another certificate with it

# Bind mounts in this namespace only: the machine's files are not changed.
{ printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'; printf '127.0.0.1\t%s\n' $HOSTS; } >"$WORK/hosts"
cat "$BUNDLE" "$WORK/ca.pem" >"$WORK/ca-certificates.crt"
mount --bind "$WORK/hosts" /etc/hosts
mount --bind "$WORK/ca-certificates.crt" "$BUNDLE"

# The identity provider: stdin held open on fd 3 (it serves until stdin closes).
mkfifo "$WORK/idp.in"
/usr/bin/python3 "$ROOT/Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py" --https-port 443 --log "$WORK/unserved.log" \
    --https "$WORK/server.pem" "$WORK/server.key" <"$WORK/idp.in" >"$WORK/idp.out" 2>"$WORK/idp.err" &
idp=$!
exec 3>"$WORK/idp.in"
for _ in $(seq 100); do [ "$(wc -l <"$WORK/idp.out")" -ge 2 ] && break; kill -0 "$idp" 2>/dev/null || break; sleep 0.05; done
[ "$(wc -l <"$WORK/idp.out")" -ge 2 ] || { echo "with-broker-harness: the identity provider did not start:" >&2; cat "$WORK/idp.err" >&2; exit 1; }
: >"$WORK/unserved.log"
export TOKENCACHE_TEST_IDP="http://127.0.0.1:$(head -1 "$WORK/idp.out")"
# Trust as on a fresh machine: the system bundle only (this machine's variables point elsewhere).
unset SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE
export TOKENCACHE_TEST_CA="$WORK/ca.pem" TOKENCACHE_TEST_IDP_UNSERVED="$WORK/unserved.log" REQUESTS_CA_BUNDLE="$BUNDLE"

# The harness proves itself before the command runs: the name resolves to loopback, and a TLS client
# using only the system's default trust reaches the provider there.
/usr/bin/python3 - <<'PY' || { echo "with-broker-harness: the mapped host is not served with a trusted certificate" >&2; exit 1; }
import json, socket, urllib.request
assert socket.gethostbyname("login.microsoftonline.com") == "127.0.0.1"
with urllib.request.urlopen("https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration", timeout=10) as reply:
    assert json.load(reply)["token_endpoint"] == "https://login.microsoftonline.com/common/oauth2/v2.0/token"
PY

status=0
"$ROOT/scripts/with-test-keyring.sh" "$@" 3>&- || status=$?
exit "$status"
