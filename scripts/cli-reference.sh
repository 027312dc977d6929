#!/usr/bin/env bash
# Regenerates docs/CLI.md, the man-page-style reference of the tokencache CLI, from its --help.
# A test checks that the committed file matches, so the reference never drifts from the tool.
set -euo pipefail
cd "$(dirname "$0")/.."
# Usage: scripts/cli-reference.sh [TOKENCACHE_BINARY [OUTPUT]]   (OUTPUT - for stdout)
BIN="${1:-$(swift build --show-bin-path)/tokencache}"
OUTPUT="${2:-docs/CLI.md}"
[ "$OUTPUT" = "-" ] && OUTPUT=/dev/stdout
{
    echo "# tokencache(1)"
    echo
    echo "Generated from \`tokencache --help\` by scripts/cli-reference.sh; do not edit by hand."
    echo
    echo '```'
    COLUMNS=100 "$BIN" --help
    echo '```'
    # Every subcommand --help lists, so a new one is never left out of the reference.
    commands=$(COLUMNS=100 "$BIN" --help | awk '/SUBCOMMANDS:$/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^[^ ]/ {on=0}')
    for command in $commands; do
        echo
        echo "## tokencache $command"
        echo
        echo '```'
        COLUMNS=100 "$BIN" help "$command"
        echo '```'
    done
} > "$OUTPUT"
