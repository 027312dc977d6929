#!/usr/bin/env bash
# Runs the Secret Service suites (and the SDK-cache round trips and MSAL Python interop, which
# go through the Secret Service too) against the other providers (#25): KeePassXC and KWallet, each
# headless as the only org.freedesktop.secrets owner on a private bus (scripts/with-test-keyring.sh --provider,
# which set TOKENCACHE_TEST_PROVIDER: tests that cannot apply to a provider check its documented
# behaviour instead). Needs a finished `swift build --build-tests` (scripts/test.sh makes one).
#   scripts/test-providers.sh [keepassxc|kwallet ...]
# TOKENCACHE_KWALLET_LOOKUPS sets the cold lookups of the KWallet key-derivation test (default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
export TOKENCACHE_TEST_PYTHON="${TOKENCACHE_TEST_PYTHON:-$PWD/.venv/bin/python}"
export TOKENCACHE_BUILD_DIR="${TOKENCACHE_BUILD_DIR:-$(swift build --show-bin-path)}"
SUITES="${TOKENCACHE_PROVIDER_SUITES:-SecretServiceTests|TransferSessionTests|ProviderTests|SDKCacheCorpusTests|MSALPythonInteropTests}"
providers=("$@"); ((${#providers[@]})) || providers=(keepassxc kwallet)
# Tests for another provider are left out, not skipped: the GNOME Keyring ones start a GNOME
# Keyring (or a bare bus) of their own and run in scripts/test.sh; KWallet's run under KWallet.
declare -A skip=(
    [keepassxc]="SecretServiceTests/(dedicatedCollection|noProvider)|SecretServiceProviderTests/(coldLookups|lockedWalletIsLocked)"
    [kwallet]="SecretServiceTests/(dedicatedCollection|noProvider)"
)
status=0
for provider in "${providers[@]}"; do
    start=$SECONDS
    RUN_DIR="$(mktemp -d /tmp/tokencache-providers.XXXXXX)"
    mkdir -p "$RUN_DIR/tmp"; chmod 711 "$RUN_DIR" "$RUN_DIR/tmp"
    TMPDIR="$RUN_DIR/tmp" TOKENCACHE_TEST_LOG_FILE="$RUN_DIR/trace.log" TOKENCACHE_TEST_OUTPUT_FILE="$RUN_DIR/output.log" \
        TOKENCACHE_LOG_FILE="$RUN_DIR/trace.log" \
        scripts/with-test-keyring.sh --provider "$provider" swift test --skip-build --filter "$SUITES" --skip "${skip[$provider]}" || status=1
    MIN_LOG_LINES=1 scripts/check-no-secrets.sh "$RUN_DIR/trace.log" "$RUN_DIR/output.log" "$RUN_DIR/tmp" || status=1
    rm -rf "$RUN_DIR"
    echo "== $provider: $((SECONDS - start)) s"
done
exit $status
