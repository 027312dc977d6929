#!/usr/bin/env bash
# No test of logic sleeps or bounds wall-clock time (#45 item 6): such tests inject a clock
# (PublicClientApplication.Options.clock, ManualClock in Tests/TokenCacheTestSupport) and advance
# it, and wait for a program through its own events (RunningProgram). This greps Tests/ and
# python/tests/ for
# sleeps, wall-clock reads and time limits; each file may hold at most the number of such lines
# .ci/test-sleep-allowlist grants it, with the reason written there (tests that measure time on
# purpose, wait for another process that gives no event, or stand in for a slow server).
#   scripts/check-test-sleeps.sh        exit 1 naming each file over its allowance
set -euo pipefail
cd "$(dirname "$0")/.."
allowlist=.ci/test-sleep-allowlist
# Swift and C sleeps, Python's and the shell's (in scripts the tests write), wall-clock reads
# and bounds, and swift-testing's time limits.
pattern='time\.monotonic\(\)|Task\.sleep|Thread\.sleep|usleep\(|(^|[^_[:alnum:].])sleep\(|time\.sleep|(^|[^[:alnum:]])sleep [0-9]|ContinuousClock\(\)|ContinuousClock\.now|Date\(\) *[<>]|Date\(\)\.timeIntervalSince\(|\.timeLimit\('
# ManualClock implements the virtual sleep itself.
hits="$(grep -rEc "$pattern" Tests python/tests --include='*.swift' --include='*.c' --include='*.py' --include='*.sh' \
        | grep -v ':0$' | grep -v '^Tests/TokenCacheTestSupport/ManualClock.swift:' || true)"
status=0
while IFS=: read -r file count; do
    [ -n "$file" ] || continue
    allowed="$(awk -v f="$file" '!/^[[:space:]]*(#|$)/ && $1 == f { print $2; exit }' "$allowlist")"
    if [ -z "$allowed" ]; then
        echo "check-test-sleeps: $file sleeps or reads the wall clock ($count line(s)) and is not in $allowlist:" >&2
        grep -nE "$pattern" "$file" | sed 's/^/    /' >&2
        echo "  a test of logic takes a clock (Options.clock, ManualClock) and advances it; one that measures time on purpose goes in $allowlist with its reason" >&2
        status=1
    elif [ "$count" -gt "$allowed" ]; then
        echo "check-test-sleeps: $file has $count sleeping or wall-clock line(s); $allowlist allows $allowed:" >&2
        grep -nE "$pattern" "$file" | sed 's/^/    /' >&2
        status=1
    fi
done <<<"$hits"
# An allowance larger than the file needs is tightened, so it cannot hide a new sleep later.
while read -r file allowed _; do
    count="$(grep -cE "$pattern" "$file" 2>/dev/null || true)"
    if [ "${count:-0}" -lt "$allowed" ]; then
        echo "check-test-sleeps: $allowlist allows $file $allowed line(s) but it has ${count:-0}: lower the allowance" >&2
        status=1
    fi
done < <(awk '!/^[[:space:]]*(#|$)/ { print $1, $2 }' "$allowlist")
((status == 0)) && echo "check-test-sleeps: no test of logic sleeps or bounds wall-clock time (allow-list: $allowlist)"
exit $status
