"""What the resource stand-ins (git_server.py, kube_server.py) share: a gate that lets through
only an access token the test identity provider (fake_idp.py, GET /introspect) says is active and
issued for the resource's scope, the counts the tests read, and revocation at the provider."""
import json
import threading
import urllib.request


class Gate:
    def __init__(self, idp, scope):
        self.idp, self.scope = idp, scope
        self.lock = threading.Lock()
        self.counts = {"accepted": [], "refused": 0, "anonymous": 0, "refused_tokens": []}

    def ask(self, path, body=None, token=None):
        request = urllib.request.Request(self.idp + path, data=json.dumps(body).encode() if body is not None else None)
        if token is not None:
            request.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read() or b"{}")

    def admits(self, token):
        """Whether `token` (None: the request carried none) is let through; counted either way."""
        info = self.ask("/introspect", token=token) if token else {"active": False, "scopes": []}
        with self.lock:
            if info["active"] and self.scope in info["scopes"]:
                self.counts["accepted"].append(token)
                return True
            self.counts["refused" if token is not None else "anonymous"] += 1
            if token:
                self.counts["refused_tokens"].append(token)
            return False

    def stats(self):
        """{"accepted": [tokens let through, in order], "refused": n, "anonymous": n, "refused_tokens": [...]}"""
        with self.lock:
            return json.loads(json.dumps(self.counts))

    def revoke_last(self):
        """Revokes, at the provider, the last token let through."""
        with self.lock:
            token = self.counts["accepted"][-1]
        self.ask("/control", {"revoke_access_token": token})
