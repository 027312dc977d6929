#!/usr/bin/env bash
# Checks that the token agent's, the identity broker's and the keeper's servers (the TokenCacheAgent module: the agent's socket server,
# the managed-identity endpoint; TokenCacheBroker: the session-bus broker) are not in what apps link (#45): no exported symbol of theirs
# (`nm -D`), no symbol in the symbol table when there is one (`nm`), and no Swift type
# descriptor naming them (a stripped library keeps the type names, so `strings` sees them).
#   scripts/check-no-agent-server.sh FILE...   e.g. libtokencache.so.0 and an app's binary
set -euo pipefail
(($#)) || { echo "usage: $0 FILE..." >&2; exit 64; }
types='AgentServer|ManagedIdentityEndpoint|TokenAgent|AgentPolicy|SocketListener|BrokerBus|BrokerService|BrokerCaller|CallerIdentity|KeeperServer|KeeperVault|KeeperCaller|AppRegistry'
status=0
for file in "$@"; do
    found="$( { nm -D --defined-only "$file" 2>/dev/null; nm --defined-only "$file" 2>/dev/null; } | grep -cE "$types" || true)"
    named="$(strings -a "$file" | grep -xE "$types" | sort -u | tr '\n' ' ' || true)"
    if ((found > 0)) || [ -n "$named" ]; then
        echo "check-no-agent-server: $file holds the agent server: $found symbols; types ${named:-none}" >&2
        status=1
    else
        echo "check-no-agent-server: $file: no agent server"
    fi
done
exit "$status"
