#!/usr/bin/env python3
"""Round-trips every cache of the SDK corpus through the tokencache CLI and
checks the export is the input "byte for byte in meaning" (#26).

    .venv/bin/python Tests/TokenCacheTests/Fixtures/sdk_cache_roundtrip.py \
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

Prints one line per file, PASS or FAIL with indented differences, followed by
the import report's "Skipped" lines; exits 1 if any file fails, 2 on usage.
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
