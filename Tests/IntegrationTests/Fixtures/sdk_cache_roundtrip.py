#!/usr/bin/env python3
"""Round-trips every cache of the SDK corpus through the tokencache CLI and
checks the export is the input "byte for byte in meaning" (#26).

    .venv/bin/python Tests/IntegrationTests/Fixtures/sdk_cache_roundtrip.py \
        .build/debug/tokencache [FILE_OR_DIR ...]

Default corpus: Fixtures/SDKCaches/*.json beside this script.

For each file:
  (a) `tokencache import --backend file --group org.example.corpus
       --format msal-json FILE` into a fresh encrypted-file store
       (XDG_DATA_HOME = a new temporary directory);
  (b) `tokencache export ... --format msal-json --output OUT`;
  (c) deep comparison of input and export after JSON parsing: every top-level
      member (known sections, unknown sections of any JSON type, unknown
      scalars), every entry key, every field including unknown nested ones;
  (d) MSAL Python (`msal.SerializableTokenCache`) loads input and export and
      `len(cache.find(T, now=0))` must agree for AccessToken, RefreshToken,
      IdToken, Account, AppMetadata (now=0: no access token counts as
      expired, so find() neither skips nor deletes any).

The input is parsed as MSAL .NET reads it: a UTF-8 byte order mark and
trailing commas are accepted (both occur in MSAL .NET's own test resources);
such inputs are reported as notes, and MSAL Python (whose deserialize() is a
plain json.loads) is handed the normalised JSON text.

Then a second pass, the silent acquisition check (always the encrypted-file
backend): for each file of SILENT_FILES, a copy with every access token's
expires_on / extended_expires_on (and refresh_on) an hour ahead and duplicate
secrets made distinct is imported into a fresh store; for each distinct
(client, account, environment, realm, target) of a plain bearer access token
whose account is in the cache, `tokencache token --client --scopes --account
--authority https://<environment>/<realm>` must print the token MSAL Python's
acquire_token_silent() returns (a PublicClientApplication with that authority,
instance_discovery=False and a fake HTTP client that answers tenant discovery
and raises on anything else, so a refresh attempt shows up as an error), or
both must have none.

Prints one line per file, PASS or FAIL with indented differences, followed by
the import report's "Skipped" lines, then "N of M passed, K failed"; then one
"PASS|FAIL silent FILE (a of n agree)" line per silent file with what was left
out and why, and "silent: A of B agree in F files". Exits 1 if any file fails
or any silent answer disagrees, 2 on usage.
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

GROUP = "org.example.corpus"
KNOWN_SECTIONS = ("AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata")
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- parsing

_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])', re.S)


def parse_lenient(raw):
    """Returns (value, notes). Accepts a BOM and trailing commas, noting each."""
    notes = []
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        notes.append("input starts with a UTF-8 BOM")
        text = text[1:]
    try:
        return json.loads(text), notes
    except json.JSONDecodeError as strict_error:
        fixed = _TRAILING_COMMA.sub(lambda m: m.group(1) or m.group(2), text)
        if fixed == text:
            raise
        value = json.loads(fixed)  # raises if something else is wrong
        notes.append("input has trailing commas (MSAL .NET accepts them; strict JSON: %s)"
                     % strict_error)
        return value, notes


# ---------------------------------------------------------------- diff

def show(value, limit=70):
    s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def path_str(parts):
    out = ""
    for p in parts:
        out += "[%d]" % p if isinstance(p, int) else "[%s]" % json.dumps(p, ensure_ascii=False)
    return out


def deep_diff(old, new, parts, out):
    """Appends 'path: what' lines for every difference below parts."""
    if type(old) is not type(new) and not (isinstance(old, (int, float)) and isinstance(new, (int, float))
                                           and not isinstance(old, bool) and not isinstance(new, bool)):
        out.append("%s: changed %s -> %s" % (path_str(parts), show(old), show(new)))
    elif isinstance(old, dict):
        for k in old:
            if k not in new:
                out.append("%s: missing (was %s)" % (path_str(parts + [k]), show(old[k])))
            else:
                deep_diff(old[k], new[k], parts + [k], out)
        for k in new:
            if k not in old:
                out.append("%s: added %s" % (path_str(parts + [k]), show(new[k])))
    elif isinstance(old, list):
        if len(old) != len(new):
            out.append("%s: changed %s -> %s" % (path_str(parts), show(old), show(new)))
        else:
            for i, (a, b) in enumerate(zip(old, new)):
                deep_diff(a, b, parts + [i], out)
    elif old != new:
        out.append("%s: changed %s -> %s" % (path_str(parts), show(old), show(new)))


def compare(inp, exp):
    diffs = []
    if not isinstance(inp, dict) or not isinstance(exp, dict):
        deep_diff(inp, exp, [], diffs)
        return diffs
    # An empty credential section means what an absent one means to every SDK (none keeps a
    # section apart from its entries), so the two are compared as equal.
    def drop_empty_known(document):
        return {k: v for k, v in document.items() if not (k in KNOWN_SECTIONS and v == {})}
    inp, exp = drop_empty_known(inp), drop_empty_known(exp)
    for name, section in inp.items():
        if name not in exp:
            kind = "section" if name in KNOWN_SECTIONS else "unknown top-level member"
            diffs.append("missing %s %s (was %s)" % (kind, json.dumps(name), show(section, 50)))
            continue
        other = exp[name]
        if not (isinstance(section, dict) and isinstance(other, dict)):
            deep_diff(section, other, [name], diffs)
            continue
        missing = [k for k in section if k not in other]
        added = [k for k in other if k not in section]
        for k in missing:
            twin = next((a for a in added if other[a] == section[k]), None)
            if twin is not None:
                added.remove(twin)
                diffs.append("re-keyed entry %s%s -> %s" % (name, path_str([k]), json.dumps(twin)))
            else:
                # same key up to case, different content: report field changes
                twin = next((a for a in added if a.lower() == k.lower()), None)
                if twin is not None:
                    added.remove(twin)
                    diffs.append("re-keyed entry %s%s -> %s" % (name, path_str([k]), json.dumps(twin)))
                    deep_diff(section[k], other[twin], [name, k], diffs)
                else:
                    diffs.append("missing entry %s%s" % (name, path_str([k])))
        for k in section:
            if k in other:
                deep_diff(section[k], other[k], [name, k], diffs)
        for k in added:
            diffs.append("added entry %s%s = %s" % (name, path_str([k]), show(other[k], 50)))
    for name in exp:
        if name not in inp:
            diffs.append("added top-level member %s = %s" % (json.dumps(name), show(exp[name], 50)))
    return diffs


# ---------------------------------------------------------------- MSAL Python

def msal_counts(text):
    import msal
    out = {}
    cache = msal.SerializableTokenCache()
    try:
        cache.deserialize(text)
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        return {t: "deserialize raised %s" % type(e).__name__ for t in KNOWN_SECTIONS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for t in KNOWN_SECTIONS:
            try:
                out[t] = len(cache.find(t, now=0))
            except Exception as e:  # noqa: BLE001
                out[t] = "%s(%s)" % (type(e).__name__, e)
    return out


# ---------------------------------------------------------------- silent acquisition

# Files of the silent pass: plain bearer access tokens of signed-in accounts, from five SDKs.
# Left out: dotnet-CacheFromTheFuture and dotnet-ExpectedTokenCache (environments "env_1".. are no
# host names to build an authority from; their accounts' authority_type is a placeholder),
# dotnet-token_cache_adfs and python-adfs (AD FS: MSAL Python needs an ADFS authority with
# discovery of its own), java-AAD_full_cache (its account's authority_type is the placeholder
# "authority_type", and MSAL Python's get_accounts() lists only MSSTS and ADFS accounts),
# python-client-credentials (app tokens, no account), java-multi-tenant-account-cache and
# node-serializer-Account (no access tokens), and near-duplicates of the chosen files
# (go-v1.0_v1.1_cache, go-test_serialized_cache, java-serialized_cache, node-msal-node-cache,
# node-serializer-cache, node-cache-unrecognized-entities, dotnet-TokenCacheWithWamId,
# dotnet-MultiTenantOBOTokenCache).
SILENT_FILES = (
    "python-public-client.json",
    "dotnet-MultiTenantTokenCache.json",
    "dotnet-MultiCloudTokenCache.json",
    "dotnet-SingleCloudTokenCache.json",
    "dotnet-token_cache_one_acc_seed.json",
    "java-sample_cache.json",
    "java-multi-cloud-account-cache.json",
    "node-default-cache.json",
    "go-v1.0_cache.json",
    "go-serialized_cache_1.1.1.json",
)


class _FakeResponse:
    def __init__(self, status_code, text):
        self.status_code, self.text, self.headers = status_code, text, {}

    def raise_for_status(self):
        if self.status_code >= 400:
            raise RuntimeError("HTTP %d" % self.status_code)


class FakeHTTP:
    """Answers MSAL Python's tenant discovery (GET <authority>[/v2.0]/.well-known/openid-configuration)
    from the URL alone; any other request, POSTs above all (a refresh), raises."""
    def get(self, url, params=None, headers=None, **kwargs):
        from urllib.parse import urlsplit
        u = urlsplit(url)
        m = re.match(r"^(.*?)(/v2\.0)?/\.well-known/openid-configuration$", u.path)
        if not m:
            raise RuntimeError("unexpected GET %s" % url)
        base = "https://%s%s" % (u.netloc, m.group(1))
        return _FakeResponse(200, json.dumps({
            "authorization_endpoint": base + "/oauth2/v2.0/authorize",
            "token_endpoint": base + "/oauth2/v2.0/token",
            "device_authorization_endpoint": base + "/oauth2/v2.0/devicecode",
            "issuer": base + "/v2.0"}))

    def post(self, url, *args, **kwargs):
        raise RuntimeError("unexpected POST %s (MSAL Python tried to refresh)" % url)

    def close(self):
        pass


def silent_queries(doc):
    """The distinct (client_id, home_account_id, environment, realm, target) of the file's plain
    bearer access tokens whose account is in the cache; plus (query, reason) for the ones left out."""
    accounts = {(a.get("home_account_id"), a.get("environment")): a.get("authority_type")
                for a in (doc.get("Account") or {}).values() if isinstance(a, dict)}
    queries, left_out = [], []
    for at in (doc.get("AccessToken") or {}).values():
        if not isinstance(at, dict):
            continue
        q = tuple(at.get(k) for k in ("client_id", "home_account_id", "environment", "realm", "target"))
        kind = at.get("token_type") or at.get("tokenType") or "Bearer"
        if kind.lower() != "bearer" or at.get("key_id") or at.get("keyId"):
            left_out.append((q, "%s token bound to a key" % kind))
        elif not all(q):
            left_out.append((q, "a field of the query is missing"))
        elif (q[1], q[2]) not in accounts:
            left_out.append((q, "no account for it in the cache"))
        elif accounts[(q[1], q[2])] not in ("MSSTS", "ADFS"):
            left_out.append((q, "its account's authority_type %r is not one MSAL Python lists"
                                % accounts[(q[1], q[2])]))
        elif q not in queries:
            queries.append(q)
    return queries, left_out


def msal_silent(doc_text, client_id, home_id, environment, realm, scopes):
    """MSAL Python's answer: the access token, None, or 'error: ...'."""
    import msal
    cache = msal.SerializableTokenCache()
    cache.deserialize(doc_text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            app = msal.PublicClientApplication(
                client_id, authority="https://%s/%s" % (environment, realm), token_cache=cache,
                http_client=FakeHTTP(), instance_discovery=False)
            acc = next((a for a in app.get_accounts() if a["home_account_id"] == home_id), None)
            if acc is None:
                return "error: get_accounts() has no account %s" % home_id
            result = app.acquire_token_silent(scopes=scopes, account=acc)
    except Exception as e:  # noqa: BLE001 - reported
        return "error: %s: %s" % (type(e).__name__, e)
    # An empty cached secret comes back as "": no token either.
    return (result.get("access_token") or None) if result else None


def check_silent(cli, path):
    """Returns (agreed, compared, lines) for one file."""
    raw = open(path, "rb").read()
    doc, _ = parse_lenient(raw)
    # Expiries (and refresh_on, so no token is "aging") an hour ahead, as strings like MSAL
    # writes them. Access tokens sharing a secret (the corpus often says "secret" in each) get
    # "#1", "#2".. appended, so that the answer tells which entry was chosen.
    future = str(int(time.time()) + 3600)
    ats = [at for at in (doc.get("AccessToken") or {}).values() if isinstance(at, dict)]
    secrets = [at.get("secret") for at in ats]
    for n, at in enumerate(ats):
        for field in ("expires_on", "extended_expires_on", "ext_expires_on", "refresh_on"):
            if field in at:
                at[field] = future
        if at.get("secret") and secrets.count(at["secret"]) > 1:
            at["secret"] += "#%d" % (n + 1)
    queries, left_out = silent_queries(doc)
    lines = ["  left out: client %s account %s scopes %r: %s" % (q[0], q[1], q[4], why)
             for q, why in left_out]
    agreed = 0
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    with tempfile.TemporaryDirectory(prefix="tkc-silent-") as tmp:
        env = dict(os.environ, XDG_DATA_HOME=os.path.join(tmp, "data"))
        env.pop("TOKENCACHE_LOG_FILE", None)
        group = GROUP + "-silent-" + hashlib.sha256(path.encode()).hexdigest()[:12]
        moved = os.path.join(tmp, os.path.basename(path))
        with open(moved, "w", encoding="utf-8") as f:
            f.write(text)
        imp = run(cli, ["import", "--backend", "file", "--group", group, "--format", "msal-json", moved], env)
        if imp.returncode != 0:
            return 0, len(queries), lines + ["  import failed (exit %d): %s" % (
                imp.returncode, " | ".join((imp.stdout + imp.stderr).splitlines()))]
        for client_id, home_id, environment, realm, target in queries:
            authority = "https://%s/%s" % (environment, realm)
            theirs = msal_silent(text, client_id, home_id, environment, realm, target.split())
            tok = run(cli, ["token", "--backend", "file", "--group", group, "--client", client_id,
                            "--scopes", target, "--account", home_id, "--authority", authority], env)
            ours = tok.stdout.strip() if tok.returncode == 0 else None
            where = "client %s account %s authority %s scopes %r" % (client_id, home_id, authority, target)
            if ours == theirs and ours is not None:
                agreed += 1
            elif ours is None and theirs is None:
                agreed += 1
                empty = any(isinstance(at, dict) and at.get("secret") == "" and
                            (at.get("client_id"), at.get("home_account_id"), at.get("environment"),
                             at.get("realm"), at.get("target")) == (client_id, home_id, environment, realm, target)
                            for at in (doc.get("AccessToken") or {}).values())
                lines.append("  both have no token%s: %s" % (
                    " (its cached secret is empty)" if empty else "", where))
            else:
                lines.append("  DISAGREE %s\n    tokencache token: %s\n    MSAL Python: %s" % (
                    where, show(ours) if ours is not None else "none (exit %d: %s)" % (
                        tok.returncode, tok.stderr.strip()), show(theirs)))
    return agreed, len(queries), lines


def silent_pass(cli, files):
    """For each file of SILENT_FILES among `files`: its access tokens moved an hour into the
    future, `tokencache token` and MSAL Python's acquire_token_silent() asked for each (client,
    account, authority, scopes) an access token names. Returns the number of disagreements
    (a file with nothing to compare counts as one)."""
    chosen = [f for f in files if os.path.basename(f) in SILENT_FILES]
    agreed = compared = empty = 0
    for f in chosen:
        a, n, lines = check_silent(cli, f)
        agreed, compared, empty = agreed + a, compared + n, empty + (n == 0)
        print("%s silent %s (%d of %d agree)" % ("PASS" if a == n and n else "FAIL",
                                                 os.path.basename(f), a, n))
        for l in lines:
            print(l)
    print("silent: %d of %d agree in %d files" % (agreed, compared, len(chosen)))
    return compared - agreed + empty


# ---------------------------------------------------------------- driver

def run(cli, args, env):
    return subprocess.run([cli] + args, env=env, capture_output=True, text=True, timeout=120)


def check(cli, path):
    """Returns (passed, lines). When the import refuses an input that needed
    normalising (BOM, trailing commas), the normalised JSON is round-tripped
    too, so the failures hiding behind the refusal show up as well."""
    raw = open(path, "rb").read()
    try:
        inp, notes = parse_lenient(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return False, ["input is not JSON: %s" % e]
    passed, lines = check_parsed(cli, path, raw, inp, notes)
    if lines and lines[0].startswith("import failed") and notes:
        with tempfile.TemporaryDirectory(prefix="tkc-corpus-norm-") as tmp:
            norm = os.path.join(tmp, os.path.basename(path))
            text = json.dumps(inp, indent=2, ensure_ascii=False)
            with open(norm, "w", encoding="utf-8") as f:
                f.write(text)
            _, more = check_parsed(cli, norm, text.encode("utf-8"), inp, [])
        lines.append("  with the input normalised (no BOM, no trailing commas): "
                     + ("no differences" if not more else ""))
        lines += ["    " + l.strip() for l in more]
    return passed, lines


def check_parsed(cli, path, raw, inp, notes):
    lines = []
    with tempfile.TemporaryDirectory(prefix="tkc-corpus-") as tmp:
        env = dict(os.environ, XDG_DATA_HOME=os.path.join(tmp, "data"))
        env.pop("TOKENCACHE_LOG_FILE", None)
        # CORPUS_BACKEND=secret-service runs the same round trip through the Secret Service (in
        # the test keyring), a group of its own per file, removed afterwards.
        backend = os.environ.get("CORPUS_BACKEND", "file")
        group = GROUP + "-" + hashlib.sha256(path.encode()).hexdigest()[:12]
        common = ["--backend", backend, "--group", group, "--format", "msal-json"]
        imp = run(cli, ["import"] + common + [os.path.abspath(path)], env)
        report = (imp.stdout + imp.stderr).splitlines()
        skipped = [l.strip() for l in report if l.strip().lower().startswith("skipped")]
        if imp.returncode != 0:
            return False, ["import failed (exit %d): %s" % (imp.returncode, " | ".join(report))] + \
                ["  note: " + n for n in notes] + ["  import: " + s for s in skipped]
        out = os.path.join(tmp, "export.json")
        exp_run = run(cli, ["export"] + common + ["--output", out], env)
        if exp_run.returncode != 0:
            return False, ["export failed (exit %d): %s" % (
                exp_run.returncode, (exp_run.stdout + exp_run.stderr).strip())] + \
                ["  skipped: " + s for s in skipped]
        exp_raw = open(out, "rb").read()
        run(cli, ["remove", "--all", "--yes", "--backend", backend, "--group", group], env)
    try:
        exp = json.loads(exp_raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return False, ["export is not strict JSON: %s" % e]

    diffs = compare(inp, exp)
    a = msal_counts(json.dumps(inp) if notes else raw.decode("utf-8"))
    b = msal_counts(exp_raw.decode("utf-8"))
    counts = ["MSAL Python find(%s): input %s, export %s" % (t, a[t], b[t])
              for t in KNOWN_SECTIONS if a[t] != b[t]]
    passed = not diffs and not counts
    lines += ["  " + d for d in diffs] + ["  " + c for c in counts]
    lines += ["  note: " + n for n in notes]
    lines += ["  import: " + s for s in skipped]
    return passed, lines


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    cli = os.path.abspath(argv[1])
    if not os.access(cli, os.X_OK):
        print("not an executable: %s" % cli)
        return 2
    targets = argv[2:] or [os.path.join(HERE, "SDKCaches")]
    files = []
    for t in targets:
        files += sorted(glob.glob(os.path.join(t, "*.json"))) if os.path.isdir(t) else [t]
    failed = 0
    for f in files:
        passed, lines = check(cli, f)
        failed += not passed
        print("%s %s" % ("PASS" if passed else "FAIL", os.path.basename(f)))
        for l in lines:
            print(l)
    print("%d of %d passed, %d failed" % (len(files) - failed, len(files), failed))
    disagreed = silent_pass(cli, files)
    return 1 if failed or disagreed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
