#!/usr/bin/env bash
# Checks that ELF binaries are linked with full RELRO (#34): the dynamic section asks for every
# symbol to be bound at start (FLAGS BIND_NOW or FLAGS_1 NOW: `-z now`) and a GNU_RELRO segment
# makes the relocated data, the GOT included, read-only after that (`-z relro`).
#   scripts/check-hardening.sh FILE...   exit 1 naming each file and what it lacks
set -euo pipefail
(($#)) || { echo "usage: $0 FILE..." >&2; exit 64; }
status=0
for file in "$@"; do
    dynamic="$(readelf --dynamic --wide "$file")"
    segments="$(readelf --program-headers --wide "$file")"
    missing=()
    grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*Flags:.* NOW( |$)' <<<"$dynamic" || missing+=("BIND_NOW (link with -z now)")
    grep -q 'GNU_RELRO' <<<"$segments" || missing+=("a GNU_RELRO segment (link with -z relro)")
    if ((${#missing[@]})); then
        echo "check-hardening: $file lacks ${missing[*]}" >&2
        status=1
    else
        echo "check-hardening: $file: full RELRO (BIND_NOW, GNU_RELRO)"
    fi
done
exit "$status"
