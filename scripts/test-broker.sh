#!/usr/bin/env bash
# The identity broker's end-to-end tests (#47): `tokencache broker` answers the real Microsoft
# authentication runtime (MSAL Python 1.39 with pymsalruntime 0.20.7, `enable_broker_on_linux=True`),
# all cases in one harness (scripts/with-broker-harness.sh: private mount and network namespaces,
# login.microsoftonline.com served by the local identity provider over TLS, a private session bus with
# gnome-keyring, a temporary HOME); then, in a second harness, MSAL Python through the broker forwarding to the
# token keeper (#62, Tests/BrokerEndToEnd/test_keeper_forwarding.py). Then the secret check over everything both logged.
#   scripts/test-broker.sh            the CLI from the debug build (built here)
#   TOKENCACHE_CLI=PATH scripts/test-broker.sh
# A case that cannot run fails (no root or sudo, no pymsalruntime, no bus): nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${TOKENCACHE_TEST_PYTHON:-$PWD/.venv/bin/python}"
if [ -z "${TOKENCACHE_CLI:-}" ]; then
    swift build --product tokencache >&2
    TOKENCACHE_CLI="$(swift build --show-bin-path)/tokencache"
fi
RUN_DIR="$(mktemp -d /tmp/tokencache-broker-run.XXXXXX)"
trap 'rm -rf "$RUN_DIR"' EXIT
chmod 755 "$RUN_DIR"
mkdir "$RUN_DIR/tmp"  # the brokers' logs (the cases' temporary files): scanned for secrets below
export TOKENCACHE_CLI TOKENCACHE_TEST_PYTHON="$PYTHON" TOKENCACHE_LOG_FILE="$RUN_DIR/trace.log" TMPDIR="$RUN_DIR/tmp"
: >"$TOKENCACHE_LOG_FILE"
# The harness changes nothing outside its namespaces: the machine's hosts file and CA bundle are compared after.
machine_files() { sha256sum /etc/hosts "$(readlink -f /etc/ssl/certs/ca-certificates.crt)"; }
before="$(machine_files)"
status=0
scripts/with-broker-harness.sh "$PYTHON" Tests/BrokerEndToEnd/test_broker.py 2>&1 | tee "$RUN_DIR/output.log" || status=$?
# #62: MSAL Python through `tokencache broker` forwarding to the token keeper (the keeper as root, real users with
# their own buses and brokers), in a harness of its own (a fresh identity provider); its logs go to the same places.
scripts/with-broker-harness.sh "$PYTHON" Tests/BrokerEndToEnd/test_keeper_forwarding.py 2>&1 | tee -a "$RUN_DIR/output.log" || status=$?
if [ "$(machine_files)" != "$before" ]; then echo "FAILED: the machine's /etc/hosts or CA bundle changed during the run" >&2; status=1; fi
# Tokens the run's provider issued are test secrets: none may appear in a log or in the output.
MIN_LOG_LINES=20 scripts/check-no-secrets.sh "$TOKENCACHE_LOG_FILE" "$RUN_DIR/output.log" "$RUN_DIR/tmp" || status=1
exit "$status"
