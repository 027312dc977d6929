"""Runs the whole benchmark suite and writes Benchmarks/results/RESULTS.md and results.json.

Started by scripts/bench.sh (which installs and builds first). Each scenario runs in its own
throw-away gnome-keyring session (scripts/with-test-keyring.sh), seeded with the scenario's
cache, so keyring sizes never mix:

    bench.py [--smoke]                 orchestrate everything (outside any keyring session)
    bench.py inner SCENARIO WORK OUT   one scenario, run inside with-test-keyring.sh
    bench.py one SCENARIO              one scenario with its seed, result printed (while working on it)

Peers on the same keyring in the same run: `secret-tool` (libsecret's C command, the floor for one
Secret Service round trip) and MSAL Python + msal-extensions (the reference Linux implementation).
"""
import json
import os
import platform
import re
import shutil
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPTS = os.path.join(ROOT, "Benchmarks", "scripts")
SMOKE = os.environ.get("BENCH_SMOKE") == "1"
# A smoke run (few repetitions, to check the machinery) never replaces the committed results.
RESULTS = os.path.join(ROOT, "Benchmarks", "results", "smoke") if SMOKE else os.path.join(ROOT, "Benchmarks", "results")
PY = os.path.join(ROOT, ".venv", "bin", "python")
GROUP = "com.microsoft.identity.universalstorage"
TENANT = "11111111-1111-1111-1111-111111111111"
AUTHORITY = "https://login.microsoftonline.com/" + TENANT
CLIENTS = ["aaaaaaaa-0000-0000-0000-000000000001", "aaaaaaaa-0000-0000-0000-000000000002",
           "aaaaaaaa-0000-0000-0000-000000000003"]
KEYRING_PASSWORD = "bench-password"

# Runs per measurement (full, smoke).
RUNS = {
    "cold": (30, 5), "cold_msal": (15, 3), "rss": (7, 2), "saves": (15, 3), "saves_1000": (5, 2), "list": (10, 3), "list_ss_1000": (3, 1),
    "file_load": (20, 3), "concurrent_ss": (10, 2), "concurrent_file": (25, 3), "aes_seconds": (2, 0.3),
}


def runs(name):
    return RUNS[name][1 if SMOKE else 0]


# Account counts of the saves and warm-lookup scenarios. A smoke run checks the machinery, which
# 1,000 accounts exercise no differently from 100: it leaves out the largest size, which alone took
# 235 of the smoke run's 588 s in CI (seeding 1,110 keyring items and MSAL Python's 15 s saves).
SIZES = (10, 100) if SMOKE else (10, 100, 1000)


def tool(name):
    return os.path.join(os.environ["BENCH_BIN"], name)


def bench_tool():
    return os.path.join(os.environ["BENCH_TOOL_BIN"], "bench-tool")


def sh(cmd, **kwargs):
    kwargs.setdefault("check", True)
    if "stdout" not in kwargs:
        kwargs["capture_output"] = True
    return subprocess.run(cmd, text=True, **kwargs)


def stats(values_ns):
    values = sorted(values_ns)
    return {"median_ms": statistics.median(values) / 1e6, "min_ms": values[0] / 1e6, "max_ms": values[-1] / 1e6,
            "runs": len(values)}


# ---------------------------------------------------------------------------------------------
# Inside a keyring session


def gen_cache(work, accounts):
    path = os.path.join(work, "cache-%d.json" % accounts)
    if not os.path.exists(path):
        with open(path, "w") as out:
            subprocess.run([PY, os.path.join(SCRIPTS, "gen_msal_cache.py"), "--accounts", str(accounts)], stdout=out, check=True)
    return path


def gen_responses(work, name, count, first, distinct=False, client=CLIENTS[0]):
    path = os.path.join(work, "responses-%s.json" % name)
    args = [PY, os.path.join(SCRIPTS, "gen_msal_cache.py"), "--responses", str(count), "--first", str(first), "--client", client]
    with open(path, "w") as out:
        subprocess.run(args + (["--distinct"] if distinct else []), stdout=out, check=True)
    return path


def make_default():
    sh([PY, os.path.join(SCRIPTS, "keyring_admin.py"), "make-default", "Benchmark", KEYRING_PASSWORD])


def store_msal_copy(work, source):
    """Gives MSAL Python the same content: our group exported as MSAL JSON, in its persistence.

    Where the export fails (it reads every item, see the 1,000-account scenario), the generated
    cache the keyring was seeded from is stored instead: verify_seeding checked that an export
    returns exactly that document.
    """
    export = os.path.join(work, "export-%d.json" % os.getpid())
    if os.path.exists(export):
        os.remove(export)
    done = sh([tool("tokencache"), "export", "--backend", "secret-service", "--format", "msal-json", "--output", export], check=False)
    used = export if done.returncode == 0 else source
    sh([PY, os.path.join(SCRIPTS, "msal_bench.py"), "store", used])
    with open(used) as handle:
        content = json.load(handle)
    if os.path.exists(export):
        os.remove(export)
    return content, ("tokencache export" if done.returncode == 0 else "the generated cache (export failed: %s)" % first_line(done.stderr))


def first_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "?"


def timed_or_error(argv):
    """Runs argv; returns (parsed JSON stdout, None) or (None, {error, seconds})."""
    start = time.perf_counter()
    done = sh(argv, check=False)
    if done.returncode != 0:
        return None, {"error": first_line(done.stderr), "seconds": time.perf_counter() - start}
    return json.loads(done.stdout), None


def hyperfine(commands, runs_, warmup, work, rounds=1):
    """Times commands with hyperfine. With rounds > 1 the commands take turns, in alternating
    order, in `rounds` shorter hyperfine runs whose samples are pooled: on a shared VM whose
    speed drifts, one command's runs are then not all taken at a different speed from another's."""
    out = os.path.join(work, "hyperfine.json")
    pooled = {name: [] for name, _ in commands}
    for turn in range(rounds):
        order = commands if turn % 2 == 0 else list(reversed(commands))
        args = ["hyperfine", "--style", "none", "--runs", str(max(1, runs_ // rounds)), "--warmup", str(warmup), "-N",
                "--export-json", out]
        for name, command in order:
            args += ["-n", name, command]
        done = sh(args, check=False)
        if done.returncode != 0:
            raise SystemExit("hyperfine failed (%s): %s" % (first_line(done.stderr), "; ".join(
                "%s exits %d: %s" % (name, again.returncode, first_line(again.stderr))
                for name, again in ((name, sh(shlex.split(command), check=False)) for name, command in commands))))
        with open(out) as handle:
            data = json.load(handle)
        for entry in data["results"]:
            pooled[entry["command"]] += [t * 1e9 for t in entry["times"]]
    return {name: stats(times) for name, times in pooled.items()}


def peak_rss_kb(argv, count):
    values = []
    for _ in range(count):
        done = sh(["/usr/bin/time", "-f", "%M", *argv])
        values.append(int(done.stderr.strip().splitlines()[-1]))
    return {"median_kb": statistics.median(values), "min_kb": min(values), "max_kb": max(values), "runs": count}


def cpu_ms(argv, count):
    """User + system CPU of each whole run (wait4's accounting), which other processes' load barely
    moves, unlike wall time: the figure to compare on a shared machine."""
    values = []
    for _ in range(count):
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit("%s exited %d" % (argv[0], process.returncode))
        values.append((usage.ru_utime + usage.ru_stime) * 1e9)
    return stats(values)


def dbus_calls(argv, check=True):
    """Method calls sent to the Secret Service (and to the bus itself) while argv runs.

    dbus-monitor --profile prints one line per message; `mc` lines are method calls, with the
    destination in the fifth column. Only argv's process talks on this private bus meanwhile.
    """
    log = tempfile.NamedTemporaryFile("w+", delete=False, suffix=".dbus")
    monitor = subprocess.Popen(["dbus-monitor", "--session", "--profile"], stdout=log, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        sh(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check)
        time.sleep(0.5)
    finally:
        monitor.send_signal(signal.SIGTERM)
        monitor.wait()
    service, bus, members = 0, 0, {}
    with open(log.name) as handle:
        for line in handle:
            fields = line.split("\t")
            if len(fields) < 8 or fields[0] != "mc":
                continue
            if fields[4] == "org.freedesktop.DBus":
                bus += 1
            else:
                service += 1
                member = fields[7].strip()
                members[member] = members.get(member, 0) + 1
    os.unlink(log.name)
    return {"secret_service_calls": service, "bus_calls": bus, "by_member": members}


def at_key(cache, index, client):
    home = "%08x-0000-0000-0000-000000000000.%s" % (index, TENANT)
    for key, entry in cache["AccessToken"].items():
        if entry["home_account_id"] == home and entry["client_id"] == client:
            return key
    raise KeyError("no access token for account %d client %s" % (index, client))


def scenario_cold(work, accounts):
    make_default()
    content, _ = store_msal_copy(work, gen_cache(work, accounts))
    index = accounts // 2
    client = CLIENTS[1]
    username = "user%d@contoso.com" % index
    ours = [tool("tokencache"), "token", "--backend", "secret-service", "--client", client, "--scopes", "User.Read",
            "--account", username]
    floor = ["secret-tool", "lookup", "group", GROUP, "kind", "AccessToken", "key", at_key(content, index, client)]
    msal = [PY, os.path.join(SCRIPTS, "msal_bench.py"), "lookup", client, username, "User.Read"]
    tokens = {sh(argv).stdout.strip() for argv in (ours, msal)}
    floor_secret = json.loads(sh(floor).stdout)
    tokens.add(next(iter(floor_secret["AccessToken"].values()))["secret"])
    if len(tokens) != 1:
        raise SystemExit("the three lookups disagree on the token")
    quote = lambda argv: " ".join("'%s'" % a for a in argv)
    times = hyperfine([("tokencache", quote(ours)), ("secret-tool", quote(floor))], runs("cold"), 2 if not SMOKE else 1, work,
                      rounds=6 if not SMOKE else 1)
    times.update(hyperfine([("msal-python", quote(msal))], runs("cold_msal"), 2 if not SMOKE else 1, work))
    rss = {name: peak_rss_kb(argv, runs("rss")) for name, argv in (("tokencache", ours), ("secret-tool", floor), ("msal-python", msal))}
    calls = {name: dbus_calls(argv) for name, argv in (("tokencache", ours), ("secret-tool", floor), ("msal-python", msal))}
    return {"accounts": accounts, "clients": 3, "times": times, "peak_rss": rss, "dbus": calls}


def scenario_store(work, accounts):
    """`tokencache token --store azure-cli` against MSAL Python + msal-extensions reading the same
    Azure CLI cache file (AZURE_CONFIG_DIR points both at it), as whole processes."""
    config = os.path.join(work, "azure-%d" % accounts)
    os.makedirs(config, exist_ok=True)
    path = os.path.join(config, "msal_token_cache.json")
    shutil.copyfile(gen_cache(work, accounts), path)
    os.chmod(path, 0o600)
    os.environ["AZURE_CONFIG_DIR"] = config
    client, username = CLIENTS[1], "user%d@contoso.com" % (accounts // 2)
    ours = [tool("tokencache"), "token", "--store", "azure-cli", "--client", client, "--scopes", "User.Read", "--account", username]
    msal = [PY, os.path.join(SCRIPTS, "msal_bench.py"), "lookup-file", path, client, username, "User.Read"]
    tokens = {sh(argv).stdout.strip() for argv in (ours, msal)}
    if len(tokens) != 1:
        raise SystemExit("tokencache and MSAL Python disagree on the token in the Azure CLI cache")
    quote = lambda argv: " ".join("'%s'" % a for a in argv)
    times = hyperfine([("tokencache", quote(ours)), ("msal-python", quote(msal))], runs("cold_msal"), 2 if not SMOKE else 1, work,
                      rounds=3 if not SMOKE else 1)
    rss = {name: peak_rss_kb(argv, runs("rss")) for name, argv in (("tokencache", ours), ("msal-python", msal))}
    return {"accounts": accounts, "clients": 3, "file_bytes": os.path.getsize(path), "times": times, "peak_rss": rss}


def scenario_warm(work):
    """The ordo-one WarmLookup benchmark, in-memory and Secret Service variants (the latter reads the seeded groups)."""
    make_default()
    env = dict(os.environ, TOKENCACHE_BENCH_SECRET_SERVICE="1", TOKENCACHE_BENCH_SIZES=",".join(map(str, SIZES)))
    if SMOKE:
        env["TOKENCACHE_BENCH_SMOKE"] = "1"
    out = os.path.join(work, "warm")
    os.makedirs(out, exist_ok=True)
    done = subprocess.run(["swift", "package", "--package-path", os.path.join(ROOT, "Benchmarks"), "--disable-sandbox",
                           "benchmark", "--target", "WarmLookup", "--no-progress", "--format", "histogramPercentiles",
                           "--path", out], env=env, text=True, capture_output=True)
    if done.returncode != 0:
        raise SystemExit("warm lookup benchmark failed:\n" + done.stdout[-3000:] + done.stderr[-3000:])
    medians, details = {}, {}
    for name in sorted(os.listdir(out)):
        match = re.search(r"lookup,_([0-9,]+)_accounts.*\((in-memory|Secret_Service).*\)\.(wallClock|mallocCountTotal)\.", name)
        if not match:
            continue
        key = "%s/%s" % (match.group(2).replace("_", " "), match.group(1).replace(",", ""))
        with open(os.path.join(out, name)) as handle:
            rows = handle.read().splitlines()
        percentiles = {int(p): float(v) for p, v in (line.split("\t") for line in rows[1:] if line.strip())}
        entry = details.setdefault(key, {})
        if match.group(3) == "wallClock":
            medians[key] = percentiles[50]
            entry.update({"median_ns": percentiles[50], "min_ns": percentiles[0], "p90_ns": percentiles[90],
                          "max_ns": percentiles[100], "unit": rows[0].split("\t")[1]})
        else:
            entry["mallocs_per_lookup_median"] = percentiles[50]
    if not medians:
        raise SystemExit("no warm lookup results:\n" + done.stdout[-3000:])
    expected = {"%s/%d" % (b, n) for b in ("in-memory", "Secret Service") for n in SIZES}
    if set(medians) != expected:
        sys.stderr.write("warm lookup: missing %s\n%s\n%s\n" % (sorted(expected - set(medians)), done.stdout[-4000:], done.stderr[-4000:]))
    return {"medians_ns": medians, "details": details, "missing": sorted(expected - set(medians))}


def save_comparison(work, accounts):
    """Our in-process save vs MSAL Python's PersistedTokenCache.add, the same responses."""
    index = accounts // 2
    count = runs("saves_1000" if accounts >= 1000 else "saves")  # MSAL Python takes ~15 s a save at 1,000
    responses = gen_responses(work, "save-%d" % accounts, count + 1, index)
    ours, ours_error = timed_or_error([bench_tool(), "save", "ss", GROUP, responses, CLIENTS[0], AUTHORITY])
    msal = json.loads(sh([PY, os.path.join(SCRIPTS, "msal_bench.py"), "save", responses, CLIENTS[0], AUTHORITY]).stdout)
    # The first save after the load also writes the entities the refresh changed for the first time
    # (and MSAL's first save reformats the blob): both sides drop it.
    result = {"accounts": accounts, "msal-python": stats(msal["save_ns"][1:]), "msal_first_load_ms": msal["first_load_ns"] / 1e6}
    if ours:
        result.update({"ours": stats(ours["save_ns"][1:]), "ours_first_load_ms": ours["first_load_ns"] / 1e6})
    else:
        result["ours_error"] = ours_error
    # D-Bus method calls per save: a run with 4 saves minus a run with none, over 4. Not at 1,000
    # accounts: it does not depend on the size, and MSAL Python's saves take minutes there.
    result["dbus"] = {}
    if accounts >= 1000:
        return result
    empty = gen_responses(work, "none", 0, index)
    four = gen_responses(work, "four", 4, index, client=CLIENTS[2])
    per_save = {}
    for name, argv in (("ours", [bench_tool(), "save", "ss", GROUP]),
                       ("msal-python", [PY, os.path.join(SCRIPTS, "msal_bench.py"), "save"])):
        if name == "ours" and not ours:
            continue
        base = dbus_calls(argv + [empty, CLIENTS[2], AUTHORITY])
        loaded = dbus_calls(argv + [four, CLIENTS[2], AUTHORITY])
        per_save[name] = {"calls_per_save": (loaded["secret_service_calls"] - base["secret_service_calls"]) / 4,
                          "bus_calls_per_save": (loaded["bus_calls"] - base["bus_calls"]) / 4,
                          "startup_and_load_calls": base["secret_service_calls"],
                          "by_member_4_saves_incl_startup": loaded["by_member"]}
    result["dbus"] = per_save
    return result


def scenario_saves(work, accounts):
    make_default()
    _, msal_source = store_msal_copy(work, gen_cache(work, accounts))
    result = save_comparison(work, accounts)
    result["msal_content_from"] = msal_source
    # The floor for reading the whole group: gnome-keyring's own time for one GetSecrets of every item.
    floors = [json.loads(sh([PY, os.path.join(SCRIPTS, "keyring_admin.py"), "getsecrets", GROUP]).stdout) for _ in range(3)]
    result["floor"] = {"items": floors[0]["items"], "getsecrets_ms": statistics.median(f["getsecrets_ms"] for f in floors),
                       "search_ms": statistics.median(f["search_ms"] for f in floors)}
    if accounts >= 1000:
        ours = [tool("tokencache"), "list", "--json", "--backend", "secret-service"]
        listed, error = timed_or_error(ours)
        if error:
            result["list_error"] = error
        else:
            if len(listed["accounts"]) != accounts:
                raise SystemExit("list shows %d accounts, expected %d" % (len(listed["accounts"]), accounts))
            quote = lambda argv: " ".join("'%s'" % a for a in argv)
            result["list"] = hyperfine([("tokencache list --json (secret-service)", quote(ours))], runs("list_ss_1000"), 0, work)
    return result


def scenario_file(work):
    """Encrypted file: list at 1,000 x 3, in-process save and load at 10/100/1,000, AES-GCM throughput."""
    result = {"sizes": {}}
    quote = lambda argv: " ".join("'%s'" % a for a in argv)
    for accounts in (10, 100, 1000):
        group = "org.swift-tokencache.bench-file-%d" % accounts
        sh([tool("tokencache"), "import", "--backend", "file", "--group", group, "--format", "msal-json", gen_cache(work, accounts)])
        responses = gen_responses(work, "file-%d" % accounts, runs("saves") + 1, accounts // 2)
        saved = json.loads(sh([bench_tool(), "save", "file", group, responses, CLIENTS[0], AUTHORITY]).stdout)
        loaded = json.loads(sh([bench_tool(), "file-load", group, str(runs("file_load"))]).stdout)
        size = os.path.getsize(os.path.join(os.environ["XDG_DATA_HOME"], "tokencache", group + ".tkc"))
        result["sizes"][str(accounts)] = {"save": stats(saved["save_ns"][1:]), "load": stats(loaded["load_ns"]),
                                          "load_and_accounts": stats(loaded["load_and_accounts_ns"]),
                                          "entries": loaded["entries"], "file_bytes": size}
        if accounts == 1000:
            ours = [tool("tokencache"), "list", "--json", "--backend", "file", "--group", group]
            if len(json.loads(sh(ours).stdout)["accounts"]) != accounts:
                raise SystemExit("file list shows the wrong number of accounts")
            result["list"] = hyperfine([("tokencache list --json (file)", quote(ours))], runs("list"), 1, work)
            result["list_cpu"] = cpu_ms(ours, runs("list"))
    result["cold_token_tpm"] = cold_token_tpm(work)
    seconds = runs("aes_seconds")
    result["aes"] = {}
    for size in (16384, 1048576):
        ours = json.loads(sh([bench_tool(), "aes", str(size), str(seconds)]).stdout)
        speed = sh(["openssl", "speed", "-evp", "aes-256-gcm", "-bytes", str(size), "-seconds", str(max(1, int(seconds)))]).stdout
        match = re.search(r"^aes-256-gcm\s+([0-9.]+)k", speed, re.M | re.I)
        openssl_rate = float(match.group(1)) * 1000
        result["aes"][str(size)] = {"ours_seal_MBps": ours["seal_bytes_per_s"] / 1e6, "ours_open_MBps": ours["open_bytes_per_s"] / 1e6,
                                    "openssl_speed_MBps": openssl_rate / 1e6,
                                    "ratio": ours["seal_bytes_per_s"] / openssl_rate}
    return result


def start_swtpm(work):
    """A software TPM (swtpm) on two free loopback ports: its TCTI and process."""
    import socket
    state = tempfile.mkdtemp(dir=work)
    for _ in range(20):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        swtpm = subprocess.Popen(["swtpm", "socket", "--tpm2", "--server", "type=tcp,port=%d,bindaddr=127.0.0.1" % port,
                                  "--ctrl", "type=tcp,port=%d,bindaddr=127.0.0.1" % (port + 1), "--tpmstate", "dir=" + state,
                                  "--flags", "not-need-init,startup-clear"])
        for _ in range(1000):
            if swtpm.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", port + 1)).close()
                return "swtpm:host=127.0.0.1,port=%d" % port, swtpm
            except OSError:
                time.sleep(0.01)
        swtpm.kill()
        swtpm.wait()
    raise SystemExit("swtpm did not start")


def cold_token_tpm(work, accounts=10):
    """Cold `tokencache token` on the encrypted file: the key file against the TPM-sealed key
    (a software TPM here: a hardware TPM's unseal is slower, tens of milliseconds)."""
    tcti, swtpm = start_swtpm(work)
    try:
        source = gen_cache(work, accounts)
        username = "user%d@contoso.com" % (accounts // 2)
        commands, tokens = [], set()
        for name, options in (("key file", []), ("TPM", ["--key-source", "tpm"])):
            home = tempfile.mkdtemp(dir=work)
            env = ["env", "XDG_DATA_HOME=" + home, "TOKENCACHE_TPM_TCTI=" + tcti]
            sh(env + [tool("tokencache"), "import", "--backend", "file", *options, "--format", "msal-json", source])
            argv = env + [tool("tokencache"), "token", "--backend", "file", "--client", CLIENTS[1], "--scopes", "User.Read",
                          "--account", username]
            tokens.add(sh(argv).stdout.strip())
            commands.append(("token (%s)" % name, " ".join("'%s'" % a for a in argv)))
        if len(tokens) != 1:
            raise SystemExit("the key file and the TPM give different tokens")
        times = hyperfine(commands, runs("cold"), 2 if not SMOKE else 1, work, rounds=6 if not SMOKE else 1)
        times["ratio"] = times["token (TPM)"]["median_ms"] / times["token (key file)"]["median_ms"]
        return times
    finally:
        swtpm.kill()
        swtpm.wait()


def scenario_concurrent(work, backend):
    """Eight processes saving first sign-ins of distinct accounts into one group at once."""
    group = "org.swift-tokencache.bench-concurrent"  # in the session's own (empty) login keyring
    per_worker = runs("concurrent_ss" if backend == "ss" else "concurrent_file")
    files = [gen_responses(work, "worker-%s-%d" % (backend, w), per_worker, 10000 + 1000 * w, distinct=True,
                           client=CLIENTS[w % 3]) for w in range(8)]
    start = time.perf_counter()
    workers = [subprocess.Popen([bench_tool(), "worker", backend, group, files[w], CLIENTS[w % 3], AUTHORITY],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(8)]
    outputs = [w.communicate() for w in workers]
    wall = time.perf_counter() - start
    failures = [err for (out, err), w in zip(outputs, workers) if w.returncode != 0]
    export = os.path.join(work, "concurrent-%s.json" % backend)
    sh([tool("tokencache"), "export", "--backend", "secret-service" if backend == "ss" else "file", "--group", group,
        "--format", "msal-json", "--output", export])
    with open(export) as handle:
        cache = json.load(handle)
    expected_at = set()
    for w in range(8):
        for i in range(per_worker):
            expected_at.add(("%08x-0000-0000-0000-000000000000.%s" % (10000 + 1000 * w + i, TENANT), CLIENTS[w % 3]))
    found_at = {(e["home_account_id"], e["client_id"]) for e in cache.get("AccessToken", {}).values()}
    found_accounts = {e["home_account_id"] for e in cache.get("Account", {}).values()}
    lost = len(expected_at - found_at) + len({h for h, _ in expected_at} - found_accounts)
    total = 8 * per_worker
    return {"backend": backend, "processes": 8, "saves": total, "wall_s": wall, "saves_per_s": total / wall,
            "lost_updates": lost, "worker_failures": failures,
            "per_save_ms": stats([ns for out, _ in outputs if out for ns in json.loads(out)["save_ns"]])}


def inner(scenario, work, out):
    name, _, arg = scenario.partition(":")
    if name == "cold":
        result = scenario_cold(work, int(arg))
    elif name == "warm":
        result = scenario_warm(work)
    elif name == "store":
        result = scenario_store(work, int(arg))
    elif name == "saves":
        result = scenario_saves(work, int(arg))
    elif name == "file":
        result = scenario_file(work)
    elif name == "concurrent":
        result = scenario_concurrent(work, arg)
    else:
        raise SystemExit("unknown scenario " + scenario)
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)


# ---------------------------------------------------------------------------------------------
# Orchestration


def seed(work, name, groups):
    """A seed folder holding one textual keyring file with the given (accounts, group) pairs."""
    folder = os.path.join(work, "seed-" + name)
    os.makedirs(folder, exist_ok=True)
    pairs = ["%s=%s" % (gen_cache(work, accounts), group) for accounts, group in groups]
    sh([PY, os.path.join(SCRIPTS, "seed_keyring.py"), os.path.join(folder, "bench.keyring"), "--label", "Benchmark", *pairs])
    return folder


def in_keyring(scenario, work, seed_folder=None):
    out = os.path.join(work, "result-%s.json" % scenario.replace(":", "-"))
    env = dict(os.environ)
    env.pop("TOKENCACHE_TEST_KEYRING_SEED", None)
    if seed_folder:
        env["TOKENCACHE_TEST_KEYRING_SEED"] = seed_folder
    started = time.time()
    done = subprocess.run([os.path.join(ROOT, "scripts", "with-test-keyring.sh"), PY, os.path.abspath(__file__), "inner",
                           scenario, work, out], env=env, text=True, capture_output=True)
    noise = [line for line in done.stderr.splitlines() if "fd limit" not in line]
    if done.returncode != 0:
        sys.stderr.write("\n".join(noise[-40:]) + "\n")
        raise SystemExit("scenario %s failed" % scenario)
    with open(out) as handle:
        result = json.load(handle)
    print("  %-16s %5.1f s" % (scenario, time.time() - started), flush=True)
    return result


def verify_seeding(work):
    """The seeded keyring must read back exactly like one filled by `tokencache import`."""
    script = os.path.join(work, "verify.sh")
    with open(script, "w") as handle:
        handle.write("""set -e
if [ -n "${TOKENCACHE_TEST_KEYRING_SEED:-}" ]; then "$1" "$2" make-default Benchmark %s; else "$3" import --backend secret-service --format msal-json "$4" >/dev/null; fi
"$3" export --backend secret-service --format msal-json --output "$5"
secret-tool search --all group %s 2>&1 | grep -E '^(label|attribute\\.)' | sort > "$5.attributes"
""" % (KEYRING_PASSWORD, GROUP))
    cache = gen_cache(work, 10)
    outputs = []
    for mode, folder in (("import", None), ("seed", seed(work, "verify", [(10, GROUP)]))):
        out = os.path.join(work, "verify-%s.json" % mode)
        env = dict(os.environ)
        env.pop("TOKENCACHE_TEST_KEYRING_SEED", None)
        if folder:
            env["TOKENCACHE_TEST_KEYRING_SEED"] = folder
        subprocess.run([os.path.join(ROOT, "scripts", "with-test-keyring.sh"), "bash", script, PY,
                        os.path.join(SCRIPTS, "keyring_admin.py"), tool("tokencache"), cache, out],
                       env=env, check=True, capture_output=True)
        with open(out) as handle, open(out + ".attributes") as attributes:
            outputs.append((json.load(handle), attributes.read()))
    with open(cache) as handle:
        source = json.load(handle)
    if not (outputs[0] == outputs[1] and outputs[0][0] == source and outputs[0][1]):
        raise SystemExit("the seeded keyring differs from one filled by `tokencache import`")


def machine():
    def first(cmd):
        try:
            return sh(cmd, shell=True).stdout.strip().splitlines()[0]
        except Exception:
            return "?"
    cpu = first("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-")
    return {
        "cpu": cpu.strip(), "cores": os.cpu_count(), "memory": first("free -h | awk '/Mem:/ {print $2}'"),
        "uname": " ".join(platform.uname()), "swift": first("swift --version 2>&1 | head -1"),
        "gnome_keyring": first("gnome-keyring-daemon --version"), "libsecret": first("dpkg-query -W -f '${Version}' libsecret-1-0"),  # the run-time library (no -dev needed)
        "secret_tool": first("dpkg-query -W -f '${Version}' libsecret-tools"),
        "openssl": first("openssl version"), "python": first(PY + " --version"),
        "msal": first(PY + " -c 'import msal; print(msal.__version__)'"),
        "msal_extensions": first(PY + " -c 'import msal_extensions; print(msal_extensions.__version__)'"),
        "hyperfine": first("hyperfine --version"), "tokencache": first(tool("tokencache") + " --version"),
        "git": first("git -C %s describe --always --dirty" % ROOT),
    }


def main():
    os.makedirs(RESULTS, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tokencache-bench.")
    started = time.time()
    load_before = os.getloadavg()
    results = {"smoke": SMOKE, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}
    try:
        print("Checking that a seeded keyring reads like an imported one", flush=True)
        verify_seeding(work)
        print("Scenarios (each in its own throw-away keyring):", flush=True)
        results["cold"] = {str(n): in_keyring("cold:%d" % n, work, seed(work, "cold-%d" % n, [(n, GROUP)])) for n in (1, 100)}
        results["saves"] = {str(n): in_keyring("saves:%d" % n, work, seed(work, "saves-%d" % n, [(n, GROUP)])) for n in SIZES}
        results["warm"] = in_keyring("warm", work, seed(work, "warm", [(n, "org.swift-tokencache.bench-ss-%d" % n) for n in SIZES]))
        results["file"] = in_keyring("file", work)
        results["store"] = {str(n): in_keyring("store:%d" % n, work) for n in (1, 100)}
        results["concurrent"] = {b: in_keyring("concurrent:" + b, work) for b in ("ss", "file")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["duration_s"] = time.time() - started
    results["load_average"] = {"before": load_before, "after": os.getloadavg()}
    import report
    results["targets"] = report.targets(results)
    with open(os.path.join(RESULTS, "results.json"), "w") as handle:
        json.dump(results, handle, indent=1, sort_keys=True)
    with open(os.path.join(RESULTS, "RESULTS.md"), "w") as handle:
        handle.write(report.markdown(results))
    print("Wrote %s/RESULTS.md and results.json in %.0f s" % (os.path.relpath(RESULTS, ROOT), results["duration_s"]))
    missed = [t for t in results["targets"] if t["status"] == "MISS"]
    for target in results["targets"]:
        print("  %-4s %s: %s" % (target["status"], target["name"], target["measured"]))
    return 0  # benchmarks report misses in RESULTS.md; they are not a test


def one(scenario):
    """Runs one scenario with its seed and prints its result (for working on the suite)."""
    work = tempfile.mkdtemp(prefix="tokencache-bench.")
    try:
        name, _, arg = scenario.partition(":")
        seeds = {"cold": lambda: seed(work, "s", [(int(arg or 1), GROUP)]),
                 "saves": lambda: seed(work, "s", [(int(arg or 10), GROUP)]),
                 "warm": lambda: seed(work, "s", [(n, "org.swift-tokencache.bench-ss-%d" % n) for n in SIZES])}
        folder = seeds[name]() if name in seeds else None
        print(json.dumps(in_keyring(scenario, work, folder), indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "inner":
        inner(*sys.argv[2:5])
    elif len(sys.argv) > 1 and sys.argv[1] == "one":
        one(sys.argv[2])
    else:
        sys.exit(main())
