#!/usr/bin/env bash
# Fails if a secret used by the test suite shows up where it must never be: in the trace-level
# log of the whole run, in what the project's programs printed (other than `token`/`export`),
# or in files the run left in its temporary directory. Fails too when the log is too small to
# mean anything, so it cannot pass vacuously.
#   scripts/check-no-secrets.sh LOG_FILE OUTPUT_FILE [TMP_DIR]
# Secrets issued at random during the run (native-auth codes) are listed one per line in
# $TOKENCACHE_TEST_ISSUED_SECRETS, if set, and looked for as whole words with the patterns.
set -euo pipefail
LOG="$1" OUTPUT="$2" TMP="${3:-}"
MIN_LOG_LINES="${MIN_LOG_LINES:-500}"  # a full run logs about 1,000 lines
MIN_PROCESSES="${MIN_PROCESSES:-2}"    # the test process and the programs it runs (a filtered run may run none)

# Every secret the tests use, by its marker (Tests/TokenCacheTestSupport/Fixtures.swift, the
# test helper, the SSO fake identity provider, BadInputTests and the file-backend tests).
PATTERNS=(
    'secret-(at|rt)-'                                      # test helper tokens
    '(at|rt)-[0-9a-f]{8}-0000-0000-0000-0{12}'            # fixture access/refresh tokens
    'at-issued-|rt-rotated-|rt-initial-|at-list|at-dotnet' # SSO / import tokens
    'authcode-[0-9]|devicecode-[0-9]'                      # sign-in authorization and device codes (fake_idp.py)
    'eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0|eyJhbGciOiJub25lIn0'  # ID token headers
    'c2lnbmF0dXJl'                                         # fixture ID token signature
    'correct horse battery staple'                         # passphrase
    'test-password'                                        # test keyring password
    '0707070707070707|BwcHBwcHBwcH'                        # raw key bytes, hex and base64
    'A{256}'                                               # the 2 MiB token of the bad-input table
    'ct-[A-Za-z0-9_-]{32}'                                 # native-auth continuation tokens (native_auth.py)
    '(^|[^0-9])7300000[1-3]([^0-9]|$)'  # the NativeAuth tests' wrong codes (the mailed ones: ISSUED below)
    'Correct-horse-42|Strong-pass-77|Brand-new-pass-9|Good-enough-123|Wrong-password-1|lettersonlyhere'  # native-auth passwords
)
ISSUED="${TOKENCACHE_TEST_ISSUED_SECRETS:-}"
issued=0
if [ -s "$ISSUED" ]; then
    # One more pattern: those secrets as whole words (only letters, digits, - and _ are listed).
    words="$(grep -xE '[A-Za-z0-9_-]+' "$ISSUED" | sort -u | paste -sd'|' || true)"
    issued=$(wc -l < "$ISSUED")
    [ -z "$words" ] || PATTERNS+=("(^|[^A-Za-z0-9_])($words)([^A-Za-z0-9_]|$)")
fi
REGEX="$(IFS='|'; echo "${PATTERNS[*]}")"
status=0

lines=$(wc -l < "$LOG" 2>/dev/null || echo 0)
traces=$(grep -c ' trace ' "$LOG" 2>/dev/null || true)
processes=$(awk '{print $1}' "$LOG" 2>/dev/null | sort -u | wc -l)
echo "secret check: $lines log lines ($traces at trace level, from $processes processes), $(wc -l < "$OUTPUT" 2>/dev/null || echo 0) lines of program output"
if ((lines < MIN_LOG_LINES)) || ((traces == 0)) || ((processes < MIN_PROCESSES)); then
    echo "FAILED: the log $LOG is too small (< $MIN_LOG_LINES lines, no trace line or < $MIN_PROCESSES processes): logging was not captured" >&2
    status=1
fi
for file in "$LOG" "$OUTPUT"; do
    # grep stops by itself after 5 matches: no reader leaves early, so pipefail cannot hide a find.
    found="$(grep -m 5 -aEn "$REGEX" "$file" | cut -c1-300 || true)"
    if [ -n "$found" ]; then
        printf '%s\n' "$found"
        echo "FAILED: a secret appears in $file (lines above)" >&2
        status=1
    fi
done
if [ -n "$TMP" ] && [ -d "$TMP" ]; then
    leaked=$(grep -aElr "$REGEX" "$TMP" 2>/dev/null || true)
    if [ -n "$leaked" ]; then
        printf '%s\n' "$leaked" | sed -n 1,20p  # sed reads to the end: no early exit under pipefail
        echo "FAILED: a secret appears in files left under $TMP (above)" >&2
        status=1
    fi
    echo "secret check: $(find "$TMP" -type f | wc -l) leftover temporary files scanned"
fi
((issued == 0)) || echo "secret check: $issued secrets issued during the run looked for too"
((status == 0)) && echo "secret check: no secret found"
exit $status
