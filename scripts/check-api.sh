#!/usr/bin/env bash
# The Swift API against the last release: `swift package diagnose-api-breaking-changes` on every
# module of the library products, with the baseline named in .ci/api-baseline (a commit hash or
# tag: the one line that is not a comment). Fails on any break not listed, one exact message a
# line, in .ci/api-allowlist. The baseline's API is cached in .build/api-baseline/<commit>, so
# only the first run per baseline builds it (about 2.5 minutes on 2 cores).
# The tool does not report a public declaration made `package` (it reads those too):
# scripts/count-public-api.sh --check guards the ones that must stay out.
#   scripts/check-api.sh [TREEISH]    default: the one in .ci/api-baseline
set -euo pipefail
cd "$(dirname "$0")/.."
baseline="${1:-$(awk '!/^[[:space:]]*(#|$)/ { print $1; exit }' .ci/api-baseline)}"
[ -n "$baseline" ] || { echo "check-api.sh: no baseline in .ci/api-baseline (write the last release's commit or tag there)" >&2; exit 1; }
# A fresh clone may lack the baseline (a shallow clone, or a tag that did not travel): fetch it.
if ! git rev-parse --quiet --verify "$baseline^{commit}" >/dev/null; then
    git fetch --quiet origin "$baseline" 2>/dev/null || git fetch --quiet --tags --unshallow origin 2>/dev/null || true
fi
commit="$(git rev-parse --quiet --verify "$baseline^{commit}")" \
    || { echo "check-api.sh: baseline '$baseline' is not in this clone, nor fetchable from origin" >&2; exit 1; }
# Every module of the library products (Package.swift lists the façade's own), each against its
# baseline in .build/api-baseline/<commit>/<module>.json, made when missing.
# The allowlist without its comment lines, which the tool would read as malformed.
mkdir -p .build
allowlist="$(mktemp .build/api-allowlist.XXXXXX)"
trap 'rm -f "$allowlist"' EXIT
awk '!/^[[:space:]]*(#|$)/' .ci/api-allowlist >"$allowlist"
swift package diagnose-api-breaking-changes "$commit" \
    --breakage-allowlist-path "$allowlist" --baseline-dir .build/api-baseline
