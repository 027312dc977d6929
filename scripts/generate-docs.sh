#!/usr/bin/env bash
# Generates the tokencache man page and shell completion scripts from the built CLI, so they
# always say what the binary does (ArgumentParser's generate-manual tool and
# --generate-completion-script, as `swift package plugin generate-manual` would).
#   scripts/generate-docs.sh [TOKENCACHE_BINARY [OUTPUT_DIRECTORY]]
# Writes OUTPUT_DIRECTORY (default .build/docs)/man/man1/tokencache.1 and
# completions/{bash/tokencache, zsh/_tokencache, fish/tokencache.fish}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-$(swift build --show-bin-path)/tokencache}"
OUT="${2:-.build/docs}"
[ -x "$BIN" ] || { echo "generate-docs.sh: no tokencache binary at $BIN (build it first)" >&2; exit 1; }
# The tool that turns the CLI's --experimental-dump-help into mdoc: a product of the resolved
# swift-argument-parser, built in debug (it runs once, briefly). GENERATE_MANUAL names one built
# already (the tests: SwiftPM is busy with `swift test` then).
if [ -z "${GENERATE_MANUAL:-}" ]; then
    swift build --product generate-manual >&2
    GENERATE_MANUAL="$(swift build --show-bin-path)/generate-manual"
fi
# The page's date is the last commit's (or SOURCE_DATE_EPOCH's), so rebuilding changes nothing.
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    DATE="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)"
else
    DATE="$(git log -1 --format=%cs 2>/dev/null || date -u +%Y-%m-%d)"
fi
mkdir -p "$OUT/man/man1" "$OUT/completions/bash" "$OUT/completions/zsh" "$OUT/completions/fish"
"$GENERATE_MANUAL" "$BIN" --output-directory "$OUT/man/man1" --date "$DATE" --authors "swift-tokencache contributors"
# An empty input line is no mdoc (man warns of each): a run of them is the paragraph break it means.
# The generated EXIT STATUS (.Ex -std: "0 or >0") gives way to ENVIRONMENT, FILES and EXIT STATUS
# written out (docs/man/tokencache.1.sections), in mdoc's order before AUTHORS.
page="$OUT/man/man1/tokencache.1"
awk -v sections=docs/man/tokencache.1.sections '
    /^\.Sh "EXIT STATUS"/ { skip = 1; while ((getline line < sections) > 0) print line; next }
    /^\.Sh / { skip = 0 }
    skip { next }
    /^[[:space:]]*$/ { blank = 1; next } { if (blank) print ".Pp"; blank = 0; print }' "$page" > "$page.new"
mv "$page.new" "$page"
# Completion scripts are sourced, never run: no hashbang (ArgumentParser starts bash's with one).
"$BIN" --generate-completion-script bash | sed '1{/^#!/d}' > "$OUT/completions/bash/tokencache"
"$BIN" --generate-completion-script zsh > "$OUT/completions/zsh/_tokencache"
"$BIN" --generate-completion-script fish > "$OUT/completions/fish/tokencache.fish"
echo "Man page and completions for $BIN in $OUT" >&2
