#!/usr/bin/env python3
"""The token keeper benchmark (#62): a token from the keeper against a cold local lookup, paired.

Run as root (useradd, setpriv, the keeper itself) by scripts/bench-keeper.sh. A user made with
useradd saves one sign-in (Examples/example-response.json, an access token valid for an hour, so
neither side refreshes) to the encrypted file, enrols it with the keeper (which removes her
copy), then saves it again. Both sides are then a whole `tokencache token` process run as her
with setpriv, the same binary (a copy in a root-owned directory under /opt, the app apps.d allows):
  A  through the keeper: TOKENCACHE_AGENT_SOCK at the keeper's socket (the keeper run as root);
  B  a cold local lookup: `--backend file`, her own encrypted file, no agent.
A and B take turns, the order alternating each pair, after warm-up runs of each; the figures are
the medians of the per-pair ratios A/B (wall and CPU) and of each side, with min and max.
Writes KEEPER.md and keeper.json into the results directory (default Benchmarks/results).
  bench_keeper.py --binary PATH [--pairs N] [--warmup N] [--results DIR]
"""
import argparse, json, os, platform, pwd, resource, shutil, statistics, subprocess, sys, tempfile, time, uuid

CLIENT = "aaaaaaaa-0000-0000-0000-0000000e0a1e"
AUTHORITY = "https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111"
GROUP = "com.example.keeper-bench"


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def timed(argv, env):
    """Wall and CPU time (user + system of the child) of one process, in ms; its output checked."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or "at-example-not-a-real-token" not in done.stdout:
        sys.exit(f"bench_keeper: {' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return wall, cpu


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "q1": statistics.quantiles(values, n=4)[0], "q3": statistics.quantiles(values, n=4)[2]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--results", default="Benchmarks/results")
    args = parser.parse_args()
    if os.getuid() != 0:
        sys.exit("bench_keeper: run as root (useradd, setpriv, the keeper)")
    tag = uuid.uuid4().hex[:6]
    user = f"tckbench{tag}"
    root = tempfile.mkdtemp(prefix="tckbench-")
    appdir = f"/opt/tckbench-{tag}"
    keeper = None
    try:
        for directory in (root, f"{root}/run", f"{root}/apps.d", appdir):
            os.makedirs(directory, exist_ok=True)
            os.chmod(directory, 0o755)
        app = f"{appdir}/tokencache"
        shutil.copy(args.binary, app)
        os.chmod(app, 0o755)
        with open(f"{root}/apps.d/bench.json", "w") as f:
            json.dump({"executable": app, "groups": [GROUP], "clientIDs": [CLIENT]}, f)
        os.chmod(f"{root}/apps.d/bench.json", 0o644)
        run(["useradd", "--create-home", "--user-group", "--shell", "/bin/sh", user])
        entry = pwd.getpwnam(user)
        socket = f"{root}/run/keeper.sock"
        keeper_log = open(f"{root}/keeper.log", "w")
        clean = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH")}
        keeper = subprocess.Popen([app, "keeper", "--socket", socket, "--state-dir", f"{root}/state", "--apps-dir", f"{root}/apps.d"],
                                  env=clean, stdout=keeper_log, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        line = ""
        while "serving at" not in line:
            line = keeper.stderr.readline()
            if not line:
                sys.exit("bench_keeper: the keeper did not start")
        # The rest of what it logs (a line per decision) goes to its log file, not a full pipe.
        subprocess.Popen(["cat"], stdin=keeper.stderr, stdout=keeper_log)
        env = {"HOME": entry.pw_dir, "USER": user, "LOGNAME": user, "PATH": "/usr/bin:/bin",
               "XDG_RUNTIME_DIR": f"{entry.pw_dir}/.run"}
        setpriv = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups", "--"]
        run(setpriv + ["mkdir", "-m", "0700", "-p", env["XDG_RUNTIME_DIR"]], env=env)
        response = open(os.path.join(os.path.dirname(__file__), "../../Examples/example-response.json")).read()
        save = setpriv + [app, "save", "--backend", "file", "--group", GROUP, "--client", CLIENT,
                          "--authority", AUTHORITY, "--scopes", "User.Read"]
        run(save, env=env, input=response)
        run(setpriv + [app, "keeper", "--enroll", "--socket", socket, "--backend", "file", "--group", GROUP], env=env)
        run(save, env=env, input=response)  # her local copy again, for side B
        token = setpriv + [app, "token", "--client", CLIENT, "--scopes", "User.Read"]
        sides = {
            "keeper": (token, dict(env, TOKENCACHE_AGENT_SOCK=socket, TOKENCACHE_AGENT_UID="0")),
            "local": (token[:-4] + ["--backend", "file", "--group", GROUP] + token[-4:], env),
        }
        for _ in range(args.warmup):
            for argv, e in sides.values():
                timed(argv, e)
        load_before = os.getloadavg()[0]
        wall = {"keeper": [], "local": []}
        cpu = {"keeper": [], "local": []}
        for pair in range(args.pairs):
            order = ["keeper", "local"] if pair % 2 == 0 else ["local", "keeper"]
            for side in order:
                w, c = timed(*sides[side])
                wall[side].append(w)
                cpu[side].append(c)
        load_after = os.getloadavg()[0]
        # Every keeper-side run was answered by the keeper: its audit log has one granted token each.
        with open(f"{root}/state/{entry.pw_uid}/audit.log") as f:
            granted = sum(1 for line in f if (e := json.loads(line))["op"] == "token" and e["outcome"] == "granted")
        if granted != args.warmup + args.pairs:
            sys.exit(f"bench_keeper: the keeper granted {granted} tokens for {args.warmup + args.pairs} keeper-side runs")
        ratio_wall = [a / b for a, b in zip(wall["keeper"], wall["local"])]
        ratio_cpu = [a / b if b > 0 else float("nan") for a, b in zip(cpu["keeper"], cpu["local"])]
        ratio_cpu = [r for r in ratio_cpu if r == r]
        binary_sha = run(["git", "rev-parse", "--short", "HEAD"]).stdout.strip()
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": binary_sha, "binary": args.binary,
            "cpus": os.cpu_count(), "load_before": load_before, "load_after": load_after,
            "kernel": platform.release(), "pairs": args.pairs, "warmup": args.warmup,
            "wall_ms": {k: summary(v) for k, v in wall.items()}, "cpu_ms": {k: summary(v) for k, v in cpu.items()},
            "ratio_wall": summary(ratio_wall), "ratio_cpu": summary(ratio_cpu) if len(ratio_cpu) > 1 else None,
            "raw_wall_ms": wall,
        }
        os.makedirs(args.results, exist_ok=True)
        with open(f"{args.results}/keeper.json", "w") as f:
            json.dump(result, f, indent=1)
        def row(name, s):
            return f"| {name} | {s['median']:.2f} | {s['q1']:.2f}–{s['q3']:.2f} | {s['min']:.2f} | {s['max']:.2f} |"
        lines = [
            "# Token keeper benchmark", "",
            f"Written by `scripts/bench-keeper.sh` (Benchmarks/scripts/bench_keeper.py) on {result['date']} at {binary_sha}; "
            f"{result['cpus']} CPUs, 1-minute load {load_before:.2f} before and {load_after:.2f} after. `{args.binary}`. "
            f"{args.pairs} pairs after {args.warmup} warm-up runs of each side, the order alternating; each run a whole "
            "`tokencache token` process as a user made with useradd (setpriv), the same binary on both sides, "
            "an access token valid for an hour (no refresh on either side).", "",
            "- **keeper**: `TOKENCACHE_AGENT_SOCK` at the keeper's socket; the keeper (run as root) identifies the caller "
            "(SO_PEERCRED, pidfd, /proc/PID/exe, its directories), reads apps.d, decrypts her group and logs the decision.",
            "- **local**: a cold lookup in her own encrypted file (`--backend file`), no agent.", "",
            "| wall, ms | median | quartiles | min | max |", "|---|---|---|---|---|",
            row("token from the keeper", result["wall_ms"]["keeper"]), row("cold local lookup", result["wall_ms"]["local"]), "",
            "| CPU of the calling process, ms | median | quartiles | min | max |", "|---|---|---|---|---|",
            row("token from the keeper", result["cpu_ms"]["keeper"]), row("cold local lookup", result["cpu_ms"]["local"]), "",
            "| per-pair ratio keeper / local | median | quartiles | min | max |", "|---|---|---|---|---|",
            row("wall", result["ratio_wall"]),
        ]
        if result["ratio_cpu"]:
            lines.append(row("CPU of the calling process (the keeper's own CPU not counted)", result["ratio_cpu"]))
        lines.append("")
        with open(f"{args.results}/KEEPER.md", "w") as f:
            f.write("\n".join(lines))
        print("\n".join(lines))
    finally:
        if keeper is not None:
            keeper.kill()
            keeper.wait()
        subprocess.run(["userdel", "-r", user], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(appdir, ignore_errors=True)


if __name__ == "__main__":
    main()
