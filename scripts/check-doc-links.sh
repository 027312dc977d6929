#!/usr/bin/env bash
# Checks that every relative link in the repository's Markdown files resolves: the file or
# folder exists, and a #fragment names a heading of the target (GitHub's anchor rules).
# External links (http, https, mailto) are not fetched. Exits 1 listing each broken link.
#   scripts/check-doc-links.sh [FILE.md ...]      default: every tracked *.md
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then files=("$@"); else mapfile -t files < <(git ls-files '*.md'); fi
python3 - "${files[@]}" <<'PY'
import os, re, sys

def anchors(path, cache={}):
    if path not in cache:
        slugs, seen, fenced = set(), {}, False
        for line in open(path, encoding="utf-8"):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if fenced or not line.startswith("#"):
                continue
            text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip())
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            slugs.add(slug if count == 0 else f"{slug}-{count}")
        cache[path] = slugs
    return cache[path]

broken = 0
for source in sys.argv[1:]:
    fenced = False
    for number, line in enumerate(open(source, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
            problem = None
            if not os.path.exists(resolved):
                problem = "no such file"
            elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                problem = f"no heading #{fragment} in {resolved}"
            if problem:
                print(f"{source}:{number}: {target}: {problem}")
                broken += 1
sys.exit(1 if broken else 0)
PY
