#!/usr/bin/env bash
# Checks the layering docs/ARCHITECTURE.md draws (#45): the stores are leaves and sign-in stands
# on the primitives, not on a store.
#   - No store (SecretServiceStore, EncryptedFileStore, SandboxStore) imports another store, in
#     its sources or as a dependency in Package.swift.
#   - Sign-in (Sources/TokenCache/SignIn) imports no store.
#   - The primitives (TokenCacheCrypto, TokenCacheDBus) import no store, and TokenCacheCrypto no
#     GLib (CLibSecret) nor TokenCacheDBus: the encrypted file, on Crypto alone, links no GLib/GIO.
#   - The token keeper (TokenCacheKeeper) is linked by the CLI only: no other module imports it,
#     no other target but the CLI's tests depends on it, no product holds it.
#   - The token pipeline (TokenCachePipeline, #58) imports no store, no TokenCacheDBus, GLib
#     (CLibSecret) or libcurl (CCurl), and not the façade (TokenCache): the façade fills its seams.
#   - The HTTP layer under it (TokenCacheHTTP: the transport protocol, libcurl's transport) imports
#     no store, no TokenCacheDBus or GLib, and neither the pipeline nor the façade.
#   - The identity broker's server (TokenCacheBroker) imports none of the package's C modules: its
#     GLib handles are TokenCacheDBus's owning types (#58 item 4), and it depends on none in Package.swift.
#   - The encrypted-file-only product (TokenCacheEncryptedFile), with the pipeline so that its
#     apps refresh, holds no module that depends on GLib (CLibSecret) or TokenCacheDBus, directly or not.
#   - The engine (TokenEngine, which decides account, tenant, staleness, store, agent and broker)
#     is defined in TokenCachePipeline only: other modules extend it (the façade's seams), never
#     declare it.
#   - One place decides (#58): no module but TokenCachePipeline calls the engine's decision
#     functions (tenant resolution, the agent rule, the account rule, the broker-use rule, the
#     decision itself) or compares a BrokerUse; no exception is left (a new one is listed below, with why).
#   - docs/ARCHITECTURE.md's "Every edge" block lists exactly the target dependencies Package.swift
#     declares (tests and their helpers under Tests/ aside), and no module imports a package module
#     it does not declare as a dependency (test targets included).
#   - No import circle between the folders of Sources/TokenCache: folder A uses folder B when A's
#     code names a type declared at the top level of B's files, or calls an initializer B's
#     extension of another module's type declares (other members of extensions are not seen).
# Imports are matched in every form Swift spells them (@testable, @_exported, @_spi(...),
# internal/package/public import). Exits 1 and names each offending line.
#   scripts/check-module-graph.sh
#   scripts/check-module-graph.sh --print-edges    the block for docs/ARCHITECTURE.md, from Package.swift
set -euo pipefail
cd "$(dirname "$0")/.."
# One "A -> B" line per dependency a target of the manifest on stdin declares (Tests/ aside), sorted.
declaredEdges() {
    jq -r '.targets[] | select(.type != "test" and ((.path // "") | startswith("Tests/") | not))
        | .name as $target | .dependencies[] | (.byName // .target // .product)[0] | "\($target) -> \(.)"' | LC_ALL=C sort -u
}
if [ "${1:-}" = --print-edges ]; then
    swift package dump-package | declaredEdges
    exit 0
fi
stores=(SecretServiceStore EncryptedFileStore SandboxStore)
status=0

# The import lines of the Swift files under $1 that name one of the modules $2 (a regex).
imports() {
    grep -rnE --include='*.swift' "^[[:space:]]*(@[A-Za-z_]+(\([^)]*\))?[[:space:]]+)*((public|package|internal|fileprivate|private)[[:space:]]+)?import[[:space:]]+((class|struct|enum|protocol|typealias|func|var|let)[[:space:]]+)?($2)([[:space:].]|$)" "$1" || true
}
refuse() {
    echo "check-module-graph: $1:" >&2
    sed 's/^/    /' <<<"$2" >&2
    status=1
}

for store in "${stores[@]}"; do
    others="$(printf '%s\n' "${stores[@]}" | grep -vx "$store" | paste -sd '|')"
    found="$(imports "Sources/$store" "$others")"
    [ -z "$found" ] || refuse "$store imports another store" "$found"
done
found="$(imports Sources/TokenCache/SignIn "$(printf '%s|' "${stores[@]}" | sed 's/|$//')")"
[ -z "$found" ] || refuse "sign-in imports a store" "$found"
for module in TokenCacheCrypto TokenCacheDBus; do
    found="$(imports "Sources/$module" "$(printf '%s|' "${stores[@]}" | sed 's/|$//')")"
    [ -z "$found" ] || refuse "$module imports a store" "$found"
done
found="$(imports Sources/TokenCacheCrypto 'CLibSecret|TokenCacheDBus')"
[ -z "$found" ] || refuse "TokenCacheCrypto imports GLib or the D-Bus layer" "$found"
pipelineRefused="$(printf '%s|' "${stores[@]}")TokenCacheDBus|CLibSecret|CCurl|TokenCache"
found="$(imports Sources/TokenCachePipeline "$pipelineRefused")"
[ -z "$found" ] || refuse "TokenCachePipeline imports a store, the D-Bus layer, GLib, libcurl or the façade" "$found"
found="$(imports Sources/TokenCacheHTTP "$(printf '%s|' "${stores[@]}")TokenCacheDBus|CLibSecret|TokenCachePipeline|TokenCache")"
[ -z "$found" ] || refuse "TokenCacheHTTP imports a store, the D-Bus layer, GLib, the pipeline or the façade" "$found"
cModules='CLibSecret|CGcrypt|CCurl|COpenSSL|CTSS2|CLinux|CTokenCache'
found="$(imports Sources/TokenCacheBroker "$cModules")"
[ -z "$found" ] || refuse "the broker's server imports one of the package's C modules (its GLib calls belong to TokenCacheDBus)" "$found"
found="$(grep -rnE --include='*.swift' '^[[:space:]]*((public|package|internal|fileprivate|private|final)[[:space:]]+)*(class|struct|actor|enum)[[:space:]]+TokenEngine\b' Sources | grep -v '^Sources/TokenCachePipeline/' || true)"
[ -z "$found" ] || refuse "TokenEngine is declared outside TokenCachePipeline" "$found"

# One place decides: calls of the engine's decision functions outside the pipeline. Comment lines
# (`//`, `///`) are not calls. Each exception: path, the call it allows there (an ERE), and why.
decisions='\b(tenantAuthority|namesTenantByDomain|keyedByTenant|homeAuthority|brokerNow)\(|\bTokenEngine\.(choose|decide)\(|\bengine\.decide\(|(^|[^A-Za-z_.])agent\(for:|\bTokenEngine\.agent\(for:|\bCacheChoice\(|[!=]=[[:space:]]*\.(never|whenAvailable|always)\b|\bneedsRefresh\(\)[[:space:]]*(\?\?|\|\||&&|$)'
decisionExceptions=(
    # None left: front ends state their caller's arguments to the pipeline's EngineRoute (agent or
    # local cache), TokenEngine.open opens by it, sign-in asks TokenEngine.signInAuthority (or its
    # blocking twin), account(forUsername:) asks the engine's account(forUsername:clientID:authority:),
    # and the servers ask account(for:allowing:) or blockingAccount(for:allowing:) (the rule itself
    # is TokenEngine.choose, refused above).
)
found=""
while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    path="${hit%%:*}"; code="${hit#*:*:}"
    allowed=0
    for exception in ${decisionExceptions[@]+"${decisionExceptions[@]}"}; do
        IFS='|' read -r exceptionPath exceptionCall _ <<<"$exception"
        if [[ "$path" =~ ^${exceptionPath}$ ]] && grep -qE "$exceptionCall" <<<"$code"; then allowed=1; break; fi
    done
    ((allowed)) || found+="$hit"$'\n'
done < <(grep -rnE --include='*.swift' "$decisions" Sources | grep -v '^Sources/TokenCachePipeline/' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
found="${found%$'\n'}"
[ -z "$found" ] || refuse "a module other than TokenCachePipeline makes one of the engine's decisions (one place decides)" "$found"

# The manifest's target dependencies (a store that only depended on another could still import it
# tomorrow; SwiftPM also lets a target import what its dependencies depend on, so both are checked).
manifest="$(swift package dump-package)"
storeList="$(printf '"%s",' "${stores[@]}" | sed 's/,$//')"
found="$(jq -r --argjson stores "[$storeList]" '
    .targets[] | select(.name as $n | $stores | index($n)) | .name as $target
    | .dependencies[] | (.byName // .target // empty)[0] | select(. as $d | $stores | index($d))
    | "\($target) depends on \(.)"' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: a store depends on another store" "$found"
found="$(jq -r '
    .targets[] | select(.name == "TokenCacheCrypto") | .dependencies[] | (.byName // .target // empty)[0]
    | select(. == "CLibSecret" or . == "TokenCacheDBus") | "TokenCacheCrypto depends on \(.)"' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: TokenCacheCrypto depends on GLib or the D-Bus layer" "$found"
found="$(jq -r --argjson refused "[$storeList,\"TokenCacheDBus\",\"CLibSecret\",\"CCurl\",\"TokenCache\"]" '
    .targets[] | select(.name == "TokenCachePipeline") | .dependencies[] | (.byName // .target // empty)[0]
    | select(. as $d | $refused | index($d)) | "TokenCachePipeline depends on \(.)"' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: TokenCachePipeline depends on a store, the D-Bus layer, GLib, libcurl or the façade" "$found"

found="$(jq -r --argjson refused "[$storeList,\"TokenCacheDBus\",\"CLibSecret\",\"TokenCachePipeline\",\"TokenCache\"]" '
    .targets[] | select(.name == "TokenCacheHTTP") | .dependencies[] | (.byName // .target // empty)[0]
    | select(. as $d | $refused | index($d)) | "TokenCacheHTTP depends on \(.)"' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: TokenCacheHTTP depends on a store, the D-Bus layer, GLib, the pipeline or the façade" "$found"
found="$(jq -r --arg c "^($cModules)$" '
    .targets[] | select(.name == "TokenCacheBroker") | .dependencies[] | (.byName // .target // empty)[0]
    | select(test($c)) | "TokenCacheBroker depends on \(.)"' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: the broker's server depends on one of the package's C modules" "$found"
# Every module the encrypted-file-only product holds, with what each depends on, transitively: no GLib.
found="$(jq -r '
    (reduce .targets[] as $t ({}; .[$t.name] = [$t.dependencies[] | (.byName // .target // empty)[0]])) as $deps
    | def closure($names): ($names + [$names[] | $deps[.] // [] | .[]] | unique) as $next
          | if ($next | length) == ($names | length) then $names else closure($next) end;
    .products[] | select(.name == "TokenCacheEncryptedFile") | closure(.targets)[]
    | select(. == "CLibSecret" or . == "TokenCacheDBus") | "the product TokenCacheEncryptedFile holds \(.)"' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: the encrypted-file-only product depends on GLib" "$found"

# The token keeper (#62) is server code, like the agent's: only the CLI (and its tests) links it, no product holds it.
found="$( (imports Sources "TokenCacheKeeper"; imports Tests "TokenCacheKeeper") | grep -vE '^(Sources/(TokenCacheCLI|TokenCacheKeeper)|Tests/CLITests)/' || true)"
[ -z "$found" ] || refuse "a module other than the CLI imports TokenCacheKeeper" "$found"
found="$(jq -r '
    (.targets[] | select(.name != "TokenCacheCLI" and .name != "CLITests") | .name as $target | .dependencies[] | (.byName // .target // empty)[0]
     | select(. == "TokenCacheKeeper") | "\($target) depends on TokenCacheKeeper"),
    (.products[] | select(.targets | index("TokenCacheKeeper")) | "product \(.name) holds TokenCacheKeeper")' <<<"$manifest")"
[ -z "$found" ] || refuse "Package.swift: TokenCacheKeeper is for the CLI only" "$found"

# The drawn graph cannot drift: docs/ARCHITECTURE.md's "Every edge" block is the manifest's edges.
declared="$(declaredEdges <<<"$manifest")"
documented="$(awk '/^## Every edge/ { section = 1; next } section && /^```/ { if (block) exit; block = 1; next }
    block && NF { print }' docs/ARCHITECTURE.md | LC_ALL=C sort -u)"
[ -n "$documented" ] || refuse "docs/ARCHITECTURE.md has no \"## Every edge\" block" "(scripts/check-module-graph.sh --print-edges prints it)"
found="$(LC_ALL=C comm -23 <(echo "$declared") <(echo "$documented"))"
[ -z "$found" ] || refuse "Package.swift declares edges docs/ARCHITECTURE.md's \"Every edge\" does not list (--print-edges)" "$found"
found="$(LC_ALL=C comm -13 <(echo "$declared") <(echo "$documented"))"
[ -z "$found" ] || refuse "docs/ARCHITECTURE.md's \"Every edge\" lists edges Package.swift does not declare" "$found"

# Each module imports only the package modules it declares (SwiftPM lets a target import what its
# dependencies depend on; the graph above would not show it). Other modules are the toolchain's.
packageModules="$(jq -r '.targets[] | select(.type != "plugin") | .name | gsub("-"; "_")' <<<"$manifest" | paste -sd '|')"
found=""
while IFS=$'\t' read -r target type path; do
    if [ "$type" = test ]; then dir="${path:-Tests/$target}"; else dir="${path:-Sources/$target}"; fi
    [ -d "$dir" ] || continue
    allowed="$(jq -r --arg t "$target" '.targets[] | select(.name == $t) | .name, (.dependencies[] | (.byName // .target // .product)[0])' <<<"$manifest" | sed 's/-/_/g' | paste -sd '|')"
    found+="$(imports "$dir" "$packageModules" | grep -vE "import[[:space:]]+((class|struct|enum|protocol|typealias|func|var|let)[[:space:]]+)?($allowed)([[:space:].]|$)" || true)"$'\n'
done < <(jq -r '.targets[] | select(.type != "plugin") | [.name, .type, (.path // "")] | @tsv' <<<"$manifest")
found="$(sed '/^$/d' <<<"$found")"
[ -z "$found" ] || refuse "a module imports a package module it does not declare as a dependency in Package.swift" "$found"

# No import circle between the façade's folders (#58: Engine/ and SSO/, SSO/ and SignIn/ were one).
found="$(python3 - Sources/TokenCache <<'PY'
import os, re, sys
root = sys.argv[1]
declaration = re.compile(r'^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|open|indirect|nonisolated)\s+)*'
                         r'(?:class|struct|enum|protocol|actor|typealias)\s+([A-Za-z_]\w*)', re.M)
def code(path):  # without comments, whose type names are no use
    text = re.sub(r'/\*.*?\*/', '', open(path).read(), flags=re.S)
    return re.sub(r'//.*', '', text)
files = {}
for folder in sorted(os.listdir(root)):
    for directory, _, names in os.walk(os.path.join(root, folder)):
        files.setdefault(folder, []).extend(os.path.join(directory, n) for n in sorted(names) if n.endswith('.swift'))
files = {folder: paths for folder, paths in files.items() if paths and os.path.isdir(os.path.join(root, folder))}
texts = {path: code(path) for paths in files.values() for path in paths}
declared = {folder: {n for path in paths for n in declaration.findall(texts[path])} for folder, paths in files.items()}
uses = {}  # folder -> {folder it uses: an example "path:line: Name"}
for a, paths in files.items():
    for b, names in declared.items():
        if a == b or not names:
            continue
        pattern = re.compile(r'\b(' + '|'.join(sorted(names)) + r')\b')
        for path in paths:
            hit = next(((i, m.group(1)) for i, line in enumerate(texts[path].split('\n'), 1) for m in [pattern.search(line)] if m), None)
            if hit:
                uses.setdefault(a, {})[b] = f"{path}:{hit[0]}: {hit[1]}"
                break
# A folder's initializers of another module's type (TokenEngine(application:) was Engine/'s): a
# call whose labels fit one's parameters (in order, defaulted ones left out) uses that folder.
def inside(text, start):  # the text between the bracket at start and its match
    depth = 0
    for i in range(start, len(text)):
        depth += {'(': 1, '[': 1, '{': 1, ')': -1, ']': -1, '}': -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    return text[start + 1:]
def parts(text):  # split at the commas outside brackets
    out, depth, part = [], 0, ''
    for ch in text:
        depth += {'(': 1, '[': 1, '{': 1, ')': -1, ']': -1, '}': -1}.get(ch, 0)
        if ch == ',' and depth == 0:
            out.append(part); part = ''
        else:
            part += ch
    return [p.strip() for p in out + [part] if p.strip()]
everywhere = set().union(*declared.values())
initializers = {}  # (type, folder) -> [[(label, defaulted)]]
for b, paths in files.items():
    for path in paths:
        text = texts[path]
        for m in re.finditer(r'^(?:(?:public|package|internal|fileprivate|private)\s+)?extension\s+([A-Za-z_]\w*)[^{]*\{', text, re.M):
            if m.group(1) in everywhere:
                continue
            body = inside(text, m.end() - 1)
            for i in re.finditer(r'\binit[?!]?\s*(?:<[^>]*>)?\(', body):
                params = [(p.split()[0].rstrip(':'), '=' in p) for p in parts(inside(body, i.end() - 1))]
                initializers.setdefault((m.group(1), b), []).append(params)
def fits(labels, params):
    for label, defaulted in params:
        if labels and labels[0] == label:
            labels = labels[1:]
        elif not defaulted:
            return False
    return not labels
for (name, b), signatures in sorted(initializers.items()):
    for a, paths in files.items():
        if a == b or b in uses.get(a, {}):
            continue
        for path in paths:
            text = texts[path]
            for m in re.finditer(r'(?<![\w.])' + name + r'(?:\.init)?\(', text):
                labels = [(re.match(r'([A-Za-z_]\w*)\s*:(?!:)', arg) or re.match('', '')).group(1) or '_' for arg in parts(inside(text, m.end() - 1))]
                if any(fits(labels, params) for params in signatures):
                    line = text.count('\n', 0, m.start()) + 1
                    uses.setdefault(a, {})[b] = f"{path}:{line}: {name}(" + ''.join(l + ':' for l in labels) + ')'
                    break
            if b in uses.get(a, {}):
                break
def cycle(start):  # a path of uses from start back to start, if any
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(uses.get(node, {})):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
reported = set()
for folder in sorted(files):
    found = cycle(folder)
    if found and frozenset(found) not in reported:
        reported.add(frozenset(found))
        print(' -> '.join(found) + ':  ' + '; '.join(uses[a][b] for a, b in zip(found, found[1:])))
PY
)"
[ -z "$found" ] || refuse "an import circle between the folders of Sources/TokenCache (a folder names a type, or calls an initializer, another declares)" "$found"

((status)) || echo "check-module-graph: the stores are leaves; sign-in, the primitives and the pipeline import no store; TokenCacheCrypto uses no GLib; the pipeline no D-Bus, libcurl or façade, nor the HTTP layer under it the pipeline or GLib; the encrypted-file product no GLib; the broker's server none of the package's C modules; the pipeline alone declares the engine and makes its decisions; only the CLI links the keeper; docs/ARCHITECTURE.md lists every edge of Package.swift and no module imports an undeclared one; no circle between the façade's folders."
exit "$status"
