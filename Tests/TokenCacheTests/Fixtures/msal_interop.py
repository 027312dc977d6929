"""Drives the real MSAL Python (1.39) for the interop tests.

Reads one JSON request on stdin and writes one JSON answer on stdout:
  {"op": "add", "events": [{"client_id", "scope": [...], "token_endpoint", "response", "now"}]}
      -> {"cache": <MSAL Python's serialized cache as an object>}
  {"op": "search", "cache": <serialized cache object>, "queries": [{"credential_type", "target", "query", "now"}]}
      -> {"results": [[entry, ...], ...]}
"""
import json
import sys

import msal

request = json.load(sys.stdin)
cache = msal.SerializableTokenCache()
if request["op"] == "add":
    for event in request["events"]:
        now = event.pop("now")
        cache.add(event, now=now)
    print(json.dumps({"cache": json.loads(cache.serialize()), "version": msal.__version__}))
elif request["op"] == "search":
    cache.deserialize(json.dumps(request["cache"]))
    results = []
    for q in request["queries"]:
        results.append(list(cache.search(q["credential_type"], target=q.get("target"), query=q.get("query"), now=q.get("now"))))
    print(json.dumps({"results": results}))
else:
    sys.exit("unknown op")
