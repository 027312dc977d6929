#!/usr/bin/env bash
# Renders the Swift guide (the DocC catalog Sources/TokenCache/TokenCache.docc) with the API
# reference into .build/swift-docs (a static site). The docc plugin is added to the package only
# when TOKENCACHE_DOCS is set, so ordinary builds and apps depending on the package never resolve
# it; its own scratch folder keeps the main build as it is.
#   scripts/build-swift-docs.sh [--warnings-as-errors]
set -euo pipefail
cd "$(dirname "$0")/.."
TOKENCACHE_DOCS=1 swift package --scratch-path .build-docs \
    --allow-writing-to-directory .build/swift-docs \
    generate-documentation --target TokenCache --disable-indexing \
    --transform-for-static-hosting --output-path .build/swift-docs "$@"
echo "Swift guide: .build/swift-docs/documentation/tokencache/index.html" >&2
