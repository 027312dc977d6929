"""The managed-identity endpoint under another user's connection flood (#57 item 6).

Runs `tokencache agent --managed-identity` on a file cache holding one access token, then, as uid
65534 (setpriv; run as root), holds N connections to the endpoint open, reconnecting each one the
endpoint closes, while this user asks the endpoint for its token R times in a row. Reports this
user's latency (median, p95, max), the answers that were not 200, the agent's CPU share during the
flood, how many connections the other user got refused per second, and whether this user's
requests are still in `agent --list-requests`. Compare binaries with --binary.

    python3 Benchmarks/scripts/bench_mi_flood.py --binary .build/debug/tokencache --label after
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CLIENT = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
USER = "alice@contoso.example"
RESOURCE = "https://management.azure.com"

ATTACKER = r"""
import resource, selectors, signal, socket, sys, time
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
selector = selectors.DefaultSelector()
def connect():
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
            return
        except OSError:
            time.sleep(0.01)
for _ in range(count):
    connect()
print("connected", flush=True)
closed = 0
def stop(*_):
    print("closed", closed, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for key, _ in selector.select(timeout=0.5):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if data:
            continue
        selector.unregister(s)
        s.close()
        closed += 1
        connect()
print("closed", closed, flush=True)
"""


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def setup(binary, home):
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("TOKENCACHE_"):
            del env[name]
    env.update({"HOME": home, "XDG_DATA_HOME": home + "/data", "XDG_CONFIG_HOME": home + "/config",
                "XDG_RUNTIME_DIR": home + "/run", "NO_COLOR": "1"})
    os.makedirs(home + "/run", mode=0o700)
    id_token = ".".join([b64({"alg": "none"}), b64({"aud": CLIENT, "iss": f"https://login.microsoftonline.com/{TENANT}/v2.0",
                                                     "oid": "uid1", "tid": TENANT, "preferred_username": USER, "sub": "s"}), "sig"])
    response = {"token_type": "Bearer", "expires_in": 86400, "access_token": "at-bench", "refresh_token": "rt-bench",
                "id_token": id_token, "client_info": b64({"uid": "uid1", "utid": TENANT}), "scope": RESOURCE + "/.default"}
    saved = subprocess.run([binary, "save", "--backend", "file", "--group", "org.example.bench", "--client", CLIENT,
                            "--authority", f"https://login.microsoftonline.com/{TENANT}", "--scopes", RESOURCE + "/.default"],
                           input=json.dumps(response).encode(), env=env, capture_output=True)
    if saved.returncode != 0:
        sys.exit("save failed: " + saved.stderr.decode())
    return env


def start_agent(binary, env, home):
    agent = subprocess.Popen([binary, "agent", "--backend", "file", "--group", "org.example.bench", "--socket", home + "/run/agent.sock",
                              "--managed-identity", "--client", CLIENT, "--account", USER],
                             env=env, stdout=subprocess.PIPE, stderr=open(home + "/agent.log", "w"), stdin=subprocess.DEVNULL)
    text = ""
    while "echo Agent pid" not in text:
        line = agent.stdout.readline().decode()
        if not line:
            sys.exit("the agent did not start: " + open(home + "/agent.log").read())
        text += line
    variables = {}
    for line in text.splitlines():
        if "=" in line and "'; export" in line:
            name, rest = line.split("=", 1)
            variables[name] = rest[1:rest.index("'; export")]
    return agent, variables


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(port, header):
    start = time.monotonic()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", f"/msi/token?api-version=2019-08-01&resource={RESOURCE}", headers={"X-IDENTITY-HEADER": header})
        status = connection.getresponse().status
        connection.close()
    except OSError as error:
        status = type(error).__name__
    return time.monotonic() - start, status


def measure(binary, connections, requests, settle):
    home = tempfile.mkdtemp(prefix="mi-flood-")
    os.chmod(home, 0o755)
    try:
        env = setup(binary, home)
        agent, variables = start_agent(binary, env, home)
        port = int(variables["IDENTITY_ENDPOINT"].split(":")[2].split("/")[0])
        header = variables["IDENTITY_HEADER"]
        baseline = [ask(port, header)[0] for _ in range(5)]
        attacker = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "python3", "-c", ATTACKER,
                                     str(port), str(connections), str(settle + requests * 70)],
                                    stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert attacker.stdout.readline().decode().strip() == "connected"
        time.sleep(settle)
        cpu0, wall0 = cpu_seconds(agent.pid), time.monotonic()
        answers = [ask(port, header) for _ in range(requests)]
        cpu1, wall1 = cpu_seconds(agent.pid), time.monotonic()
        attacker.terminate()
        closed = int((attacker.communicate()[0].decode().split() or ["", "0"])[-1] or 0)
        listed = subprocess.run([binary, "agent", "--list-requests", "--json", "--socket", home + "/run/agent.sock"],
                                env=env, capture_output=True)
        log = json.loads(listed.stdout or b"[]")
        granted = sum(1 for entry in log if entry.get("channel") == "managed-identity" and entry.get("outcome") == "granted")
        agent.terminate()
        agent.wait()
        times = sorted(seconds * 1000 for seconds, _ in answers)
        return {
            "binary": binary, "connections": connections, "requests": requests,
            "baseline_median_ms": round(statistics.median(baseline) * 1000, 2),
            "median_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[min(len(times) - 1, int(len(times) * 0.95))], 2),
            "max_ms": round(times[-1], 2),
            "not_200": [status for _, status in answers if status != 200],
            "agent_cpu_percent": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 1),
            "refused_per_second": round(closed / (settle + (wall1 - wall0)), 1),
            "requests_granted_in_log": granted, "requests_made": requests + 5,
            "log_entries": len(log),
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--settle", type=float, default=5)
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "..", "results", "mi-flood.json"))
    arguments = parser.parse_args()
    result = measure(os.path.abspath(arguments.binary), arguments.connections, arguments.requests, arguments.settle)
    result["label"] = arguments.label
    result["time"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result["load"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    existing = json.load(open(arguments.output)) if os.path.exists(arguments.output) else []
    json.dump(existing + [result], open(arguments.output, "w"), indent=2)


if __name__ == "__main__":
    main()
