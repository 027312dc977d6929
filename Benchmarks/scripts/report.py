"""Turns bench.py's results into targets (PASS/MISS) and Benchmarks/results/RESULTS.md."""
import os


def fmt_ms(value):
    return "%.1f ms" % value if value >= 10 else "%.2f ms" % value


def target(name, measured, passed, goal, section):
    return {"name": name, "measured": measured, "goal": goal, "status": "n/a" if passed is None else ("PASS" if passed else "MISS"),
            "section": section}


def targets(r):
    out = []
    for accounts, limit in (("1", 1.5), ("100", 2.0)):
        c = r["cold"][accounts]
        t = c["times"]
        ours, floor, msal = t["tokencache"]["median_ms"], t["secret-tool"]["median_ms"], t["msal-python"]["median_ms"]
        label = "1 account x 3 clients" if accounts == "1" else "100 accounts x 3 clients"
        out.append(target("Cold CLI lookup vs secret-tool, %s" % label,
                          "%s vs %s = %.2fx" % (fmt_ms(ours), fmt_ms(floor), ours / floor), ours / floor <= limit,
                          "<= %.1fx" % limit, 1))
        out.append(target("Cold CLI lookup vs MSAL Python + msal-extensions, %s" % label,
                          "%s vs %s = %.1fx faster" % (fmt_ms(ours), fmt_ms(msal), msal / ours), msal / ours >= 10,
                          ">= 10x faster", 1))
        rss = c["peak_rss"]
        ratio = rss["tokencache"]["median_kb"] / rss["secret-tool"]["median_kb"]
        out.append(target("Peak RSS vs secret-tool, %s" % label,
                          "%.1f MB vs %.1f MB = %.2fx (MSAL Python %.1f MB)" % (
                              rss["tokencache"]["median_kb"] / 1024, rss["secret-tool"]["median_kb"] / 1024, ratio,
                              rss["msal-python"]["median_kb"] / 1024), ratio <= 2, "<= 2x", 1))
    warm = r.get("warm", {}).get("medians_ns", {})
    for backend in ("in-memory", "Secret Service"):
        key = "%s/1000" % backend
        if key not in warm and r["smoke"]:
            continue  # a smoke run measures up to 100 accounts (bench.py's SIZES)
        if key not in warm:
            out.append(target("Warm in-process lookup, 1,000 accounts x 3 clients, %s" % backend,
                              "no result: the benchmark's setup failed (see section 2)", False, "<= 2 us, flat", 2))
        else:
            small = warm.get("%s/10" % backend)
            flat = " (10 accounts: %.0f ns, %.2fx)" % (small, warm[key] / small) if small else ""
            out.append(target("Warm in-process lookup, 1,000 accounts x 3 clients, %s" % backend,
                              "%.0f ns median%s" % (warm[key], flat), warm[key] <= 2000, "<= 2 us, flat", 2))
    for accounts, s in sorted(r["saves"].items(), key=lambda kv: int(kv[0])):
        msal = s["msal-python"]["median_ms"]
        calls = s.get("dbus", {})
        calls_text = "; D-Bus calls per save %.1f vs %.1f" % (calls["ours"]["calls_per_save"], calls["msal-python"]["calls_per_save"]) \
            if "ours" in calls and "msal-python" in calls else ""
        if "ours" in s:
            ours = s["ours"]["median_ms"]
            out.append(target("Save a token response, Secret Service, %s accounts x 3 present" % accounts,
                              "%s vs MSAL Python %s (%.1fx faster)%s" % (fmt_ms(ours), fmt_ms(msal), msal / ours, calls_text),
                              ours < msal, "faster than MSAL Python", 3))
        else:
            out.append(target("Save a token response, Secret Service, %s accounts x 3 present" % accounts,
                              "failed after %.1f s: %s (MSAL Python %s)" % (s["ours_error"]["seconds"], s["ours_error"]["error"], fmt_ms(msal)),
                              False, "faster than MSAL Python", 3))
    big = r["saves"].get("1000", {})
    if big.get("list"):
        value = next(iter(big["list"].values()))["median_ms"]
        floor = big.get("floor")
        floor_text = " (gnome-keyring alone needs %s to search for and hand over the %d items: see section 4)" % (
            fmt_ms(floor["search_ms"] + floor["getsecrets_ms"]), floor["items"]) if floor else ""
        out.append(target("tokencache list --json, Secret Service, 1,000 accounts x 3 clients", fmt_ms(value) + floor_text,
                          value <= 300, "<= 300 ms", 4))
    elif big.get("list_error"):
        out.append(target("tokencache list --json, Secret Service, 1,000 accounts x 3 clients",
                          "failed after %.1f s: %s" % (big["list_error"]["seconds"], big["list_error"]["error"]), False, "<= 300 ms", 4))
    file_list = r["file"].get("list")
    if file_list:
        value = next(iter(file_list.values()))["median_ms"]
        cpu = r["file"].get("list_cpu")
        cpu_text = " (CPU, user + sys: %s)" % fmt_ms(cpu["median_ms"]) if cpu else ""
        out.append(target("tokencache list --json, encrypted file, 1,000 accounts x 3 clients", fmt_ms(value) + cpu_text, value <= 50,
                          "<= 50 ms", 4))
    for size, a in sorted(r["file"]["aes"].items(), key=lambda kv: int(kv[0])):
        out.append(target("AES-256-GCM seal throughput vs openssl speed, %s-byte blocks" % size,
                          "%.0f MB/s vs %.0f MB/s = %.0f%%" % (a["ours_seal_MBps"], a["openssl_speed_MBps"], 100 * a["ratio"]),
                          a["ratio"] >= 0.8, ">= 80%", 5))
    for backend, c in r["concurrent"].items():
        name = "Secret Service" if backend == "ss" else "encrypted file"
        out.append(target("8 processes saving concurrently, %s" % name,
                          "%d saves, %.1f saves/s, %d lost updates%s" % (
                              c["saves"], c["saves_per_s"], c["lost_updates"],
                              ", %d worker failures" % len(c["worker_failures"]) if c["worker_failures"] else ""),
                          c["lost_updates"] == 0 and not c["worker_failures"], "0 lost updates", 6))
    for accounts, c in sorted(r.get("store", {}).items(), key=lambda kv: int(kv[0])):
        t = c["times"]
        ours, msal = t["tokencache"]["median_ms"], t["msal-python"]["median_ms"]
        out.append(target("tokencache token --store azure-cli vs MSAL Python + msal-extensions on the same file, %s accounts x 3" % accounts,
                          "%s vs %s = %.1fx faster" % (fmt_ms(ours), fmt_ms(msal), msal / ours), msal / ours >= 5,
                          ">= 5x faster", 7))
    return out


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def span(s):
    return "%s (%s–%s, %d runs)" % (fmt_ms(s["median_ms"]), fmt_ms(s["min_ms"]), fmt_ms(s["max_ms"]), s["runs"])


def markdown(r):
    big = r["saves"].get("1000", {})
    m = r["machine"]
    load = r["load_average"]
    parts = ["# Benchmark results\n",
             "Written by `scripts/bench.sh`%s on %s in %.0f s. Medians, with min–max and the number of runs. "
             "Each scenario ran in its own throw-away gnome-keyring (private D-Bus session), peers on the same keyring "
             "in the same run.\n" % (" (BENCH_SMOKE=1: few runs, numbers are rough)" if r["smoke"] else "", r["started"],
                                     r["duration_s"]),
             "## Machine\n",
             table(["", ""], [
                 ["CPU", "%s, %d cores, %s RAM" % (m["cpu"], m["cores"], m["memory"])], ["Kernel", m["uname"]],
                 ["Load average (1/5/15 min) before → after", "%s → %s" % (
                     "/".join("%.2f" % x for x in load["before"]), "/".join("%.2f" % x for x in load["after"]))],
                 ["tokencache", "%s (%s, release build: scripts/build-release.sh)" % (m["tokencache"], m["git"])], ["Swift", m["swift"]],
                 ["gnome-keyring", m["gnome_keyring"]], ["libsecret / secret-tool", "%s / %s" % (m["libsecret"], m["secret_tool"])],
                 ["OpenSSL", m["openssl"]], ["MSAL Python / msal-extensions", "%s / %s (%s)" % (m["msal"], m["msal_extensions"], m["python"])],
                 ["hyperfine", m["hyperfine"]]]),
             "## Targets\n",
             table(["#", "Target", "Goal", "Measured", "Result"],
                   [[t["section"], t["name"], t["goal"], t["measured"], "**%s**" % t["status"] if t["status"] == "MISS" else t["status"]]
                    for t in r["targets"]])]
    missed = [t for t in r["targets"] if t["status"] == "MISS"]
    if missed:
        parts.append("\nMissed: " + "; ".join("%s (%s, goal %s)" % (t["name"], t["measured"], t["goal"]) for t in missed) + ".\n")

    parts.append("\n## 1. Cold lookup, whole process\n\n"
                 "`tokencache token --backend secret-service --client C --scopes User.Read --account U` vs "
                 "`secret-tool lookup group G kind AccessToken key K` (the same item) vs MSAL Python + msal-extensions "
                 "(`PublicClientApplication(token_cache=PersistedTokenCache(LibsecretPersistence(...)))`, `get_accounts` + "
                 "`acquire_token_silent`) reading the same content (our group exported with `tokencache export` and stored in "
                 "its persistence). All three print the same token. hyperfine (`-N`, warm-up runs first; tokencache and secret-tool take turns in 6 rounds of 5 runs, in alternating order, samples pooled, so a drifting machine skews neither); peak RSS is GNU time "
                 "`%M`; D-Bus method calls counted with `dbus-monitor --profile`. MSAL Python's authority metadata request is "
                 "answered in-process (no network here), which flatters it.\n\n")
    rows = []
    for accounts, c in sorted(r["cold"].items(), key=lambda kv: int(kv[0])):
        for name in ("tokencache", "secret-tool", "msal-python"):
            d = c["dbus"][name]
            rows.append(["%s x 3" % accounts, name, span(c["times"][name]), "%.1f MB" % (c["peak_rss"][name]["median_kb"] / 1024),
                         "%d (+%d to the bus)" % (d["secret_service_calls"], d["bus_calls"])])
    parts.append(table(["Accounts", "Command", "Time", "Peak RSS", "D-Bus calls to the Secret Service"], rows))

    parts.append("\n## 2. Warm in-process lookup\n\n`AccountStore.accessToken(clientID:account:scopes:)` after the first "
                 "load (ordo-one/benchmark, `Benchmarks/Benchmarks/WarmLookup`). The Secret Service variant reads groups seeded "
                 "in the keyring and keeps its coherence mechanism on (the item-signal revision is checked on every lookup).\n\n")
    warm = r.get("warm", {}).get("details", {})
    rows = [[key.split("/")[0], key.split("/")[1], "%.0f ns" % d["median_ns"], "%.0f / %.0f / %.0f ns" % (d["min_ns"], d["p90_ns"], d["max_ns"]),
             "%.0f" % d.get("mallocs_per_lookup_median", float("nan"))]
            for key, d in sorted(warm.items(), key=lambda kv: (kv[0].split("/")[0], int(kv[0].split("/")[1])))]
    parts.append(table(["Backend", "Accounts (x 3 clients)", "Median per lookup", "min / p90 / max", "Mallocs per lookup"], rows)
                 if rows else "No results.\n")

    parts.append("\n## 3. Saving a token response (Secret Service)\n\n"
                 "In process, after the first load: our `AccountStore.save(responseJSON:...)` vs MSAL Python's "
                 "`PersistedTokenCache.add` (msal-extensions reloads the blob if it changed, adds, and writes the whole cache "
                 "back as one item). Each save is a refresh of one existing account (new access and refresh token), the same "
                 "responses on both sides; the first save of each run is dropped. D-Bus calls per save: a run with 4 saves minus "
                 "a run with none (startup, session and first load), over 4, counted with `dbus-monitor --profile` "
                 "(method calls sent to the Secret Service).\n\n")
    rows = []
    for accounts, s in sorted(r["saves"].items(), key=lambda kv: int(kv[0])):
        calls = s.get("dbus", {})
        calls_text = "%.1f / %.1f" % (calls["ours"]["calls_per_save"], calls["msal-python"]["calls_per_save"]) \
            if "ours" in calls and "msal-python" in calls else "not counted"
        if "ours" in s:
            rows.append([accounts, span(s["ours"]), span(s["msal-python"]), "%.1fx" % (s["msal-python"]["median_ms"] / s["ours"]["median_ms"]),
                         calls_text, "%s / %s" % (fmt_ms(s["ours_first_load_ms"]), fmt_ms(s["msal_first_load_ms"]))])
        else:
            rows.append([accounts, "**failed** after %.1f s: %s" % (s["ours_error"]["seconds"], s["ours_error"]["error"]),
                         span(s["msal-python"]), "-", calls_text, "- / %s" % fmt_ms(s["msal_first_load_ms"])])
    parts.append(table(["Accounts present (x 3)", "tokencache", "MSAL Python", "MSAL / ours",
                        "D-Bus calls per save (ours / MSAL)", "First load (ours / MSAL)"], rows))
    for accounts, s in sorted(r["saves"].items(), key=lambda kv: int(kv[0])):
        calls = s.get("dbus", {})
        if "ours" in calls:
            parts.append("\nCalls by member, %s accounts, 4 saves plus startup — ours: `%s`; MSAL Python: `%s`\n" % (
                accounts, calls["ours"]["by_member_4_saves_incl_startup"], calls["msal-python"]["by_member_4_saves_incl_startup"]))

    parts.append("\n## 4. Loading and listing 1,000 accounts x 3 clients\n\n")
    rows = []
    if big_error := r["saves"].get("1000", {}).get("list_error"):
        rows.append(["tokencache list --json (secret-service)", "**failed** after %.1f s: %s" % (big_error["seconds"], big_error["error"])])
    for source in (r["saves"].get("1000", {}).get("list", {}), r["file"].get("list", {})):
        for name, s in source.items():
            rows.append([name, span(s)])
    parts.append(table(["Command (whole process)", "Time"], rows))
    if r["file"].get("list_cpu"):
        parts.append("\nThe encrypted-file listing's CPU time (user + sys of the whole process, which other processes' load "
                     "barely moves): %s.\n" % span(r["file"]["list_cpu"]))
    loads = [(a, s["ours_first_load_ms"]) for a, s in sorted(r["saves"].items(), key=lambda kv: int(kv[0])) if "ours_first_load_ms" in s]
    parts.append("\nReading a whole group from the Secret Service (our first load in the save runs: one SearchItems, then "
                 "GetSecrets in batches of 500 paths): %s%s. GNOME Keyring answers GetSecrets item by item, and its cost per "
                 "item grows with the collection (see the floor below); msal-extensions keeps the whole cache in one item "
                 "(MSAL Python's first load: %s), and rewrites all of it on every save (the saves above).\n" % (
                     ", ".join("%s accounts x 3: %s" % (a, fmt_ms(v)) for a, v in loads),
                     "; 1,000 accounts x 3: failed after %.1f s (%s)" % (big["ours_error"]["seconds"], big["ours_error"]["error"])
                     if "ours_error" in big else "",
                     ", ".join("%s: %s" % (a, fmt_ms(s["msal_first_load_ms"])) for a, s in sorted(r["saves"].items(), key=lambda kv: int(kv[0])))))

    floors = [(a, s["floor"]) for a, s in sorted(r["saves"].items(), key=lambda kv: int(kv[0])) if "floor" in s]
    if floors:
        parts.append("\nThe floor, gnome-keyring alone: one SearchItems plus ONE GetSecrets of every item of the group on a "
                     "plain session (`keyring_admin.py getsecrets`: no decryption on either side, timed to the reply's "
                     "arrival), median of 3: %s. Its time per item grows with the collection (it looks each item up by "
                     "scanning the collection), so reading a whole group grows with the square of its size. Every listing "
                     "reads every item of the group (one item per entity, as MSAL keeps one keychain item per entity: "
                     "docs/SecretService.md), so no client lists 1,000 accounts x 3 from gnome-keyring in less than that "
                     "floor, whatever it does with the data: the 300 ms target cannot be met there.\n" % ", ".join(
                         "%s accounts x 3 (%d items): %s + %s (%.3f ms per item)" % (
                             a, f["items"], fmt_ms(f["search_ms"]), fmt_ms(f["getsecrets_ms"]), f["getsecrets_ms"] / f["items"])
                         for a, f in floors))

    parts.append("\n## 5. Encrypted file\n\nIn process. Save: `AccountStore.save` of a refresh (lock, re-read if changed, "
                 "encrypt, write a temporary file, fsync, rename, fsync the folder). Load: a fresh `EncryptedFileBackend` "
                 "reading, decrypting and parsing the file; \"+ accounts\" also builds the account store's index and lists "
                 "the accounts.\n\n")
    rows = []
    for accounts, f in sorted(r["file"]["sizes"].items(), key=lambda kv: int(kv[0])):
        rows.append([accounts, "%d entries, %.0f KB" % (f["entries"], f["file_bytes"] / 1024), span(f["save"]), span(f["load"]),
                     span(f["load_and_accounts"])])
    parts.append(table(["Accounts (x 3)", "File", "Save", "Load", "Load + accounts"], rows))
    rows = [[size, "%.0f MB/s" % a["ours_seal_MBps"], "%.0f MB/s" % a["ours_open_MBps"], "%.0f MB/s" % a["openssl_speed_MBps"],
             "%.0f%%" % (100 * a["ratio"])] for size, a in sorted(r["file"]["aes"].items(), key=lambda kv: int(kv[0]))]
    parts.append("\nAES-256-GCM through our OpenSSL wrapper (a fresh EVP context per call, as the file backend does) vs "
                 "`openssl speed -evp aes-256-gcm -bytes N`:\n\n")
    parts.append(table(["Block bytes", "Ours, seal", "Ours, open", "openssl speed", "Seal / openssl"], rows))

    parts.append("\n## 6. Eight processes saving concurrently into one group\n\n"
                 "8 processes (`bench-tool worker`), each saving first sign-ins of its own accounts (3 clients among them) "
                 "into one group at the same time; afterwards `tokencache export` must show every access token and account. "
                 "Lost updates = expected entities missing.\n\n")
    rows = [["Secret Service" if b == "ss" else "encrypted file", c["saves"], "%.1f s" % c["wall_s"], "%.1f" % c["saves_per_s"],
             span(c["per_save_ms"]), c["lost_updates"]] for b, c in r["concurrent"].items()]
    parts.append(table(["Backend", "Saves", "Wall time", "Saves/s (all 8)", "One save, per process", "Lost updates"], rows))
    if r.get("store"):
        parts.append("\n## 7. Another tool's cache: Azure CLI's file\n\n"
                     "`tokencache token --store azure-cli --client C --scopes User.Read --account U` vs MSAL Python + "
                     "msal-extensions (`PersistedTokenCache(FilePersistence(path))`, `get_accounts` + `acquire_token_silent`, "
                     "as Azure CLI reads `~/.azure/msal_token_cache.json`) on the same plaintext file (AZURE_CONFIG_DIR "
                     "points both at it); both print the same token. Whole processes, hyperfine `-N`, 3 rounds in "
                     "alternating order; MSAL Python's authority metadata request answered in-process.\n\n")
        rows = [[a, "%.0f KB" % (c["file_bytes"] / 1024), span(c["times"]["tokencache"]), span(c["times"]["msal-python"]),
                 "%.1f MB / %.1f MB" % (c["peak_rss"]["tokencache"]["median_kb"] / 1024, c["peak_rss"]["msal-python"]["median_kb"] / 1024)]
                for a, c in sorted(r["store"].items(), key=lambda kv: int(kv[0]))]
        parts.append(table(["Accounts (x 3)", "File", "tokencache", "MSAL Python", "Peak RSS (ours / MSAL)"], rows))
    history = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results", "HISTORY.md")
    if os.path.exists(history):
        with open(history) as handle:
            parts.append("\n" + handle.read())
    return "".join(parts)
