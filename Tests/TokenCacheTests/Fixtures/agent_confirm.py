"""Drives `tokencache agent --confirm` on a real pseudo-terminal, as a person at it would.

  agent_confirm.py TOKENCACHE SOCKET CONTAINER_HOME CLIENT ACCOUNT OTHER_ACCOUNT AGENT_ARGS...

Starts the agent with the terminal as its standard input and error, then runs `tokencache token`
in the container's environment four times: ACCOUNT User.Read (answered y), the same again (must
not ask), ACCOUNT Mail.Read (answered n), OTHER_ACCOUNT User.Read (must ask again: an approval is
for one account; answered n). Prints JSON: each run's exit status and output, and what the
terminal showed.
"""
import json
import os
import pty
import select
import subprocess
import sys
import time

binary, socket_path, home, client, account, other_account = sys.argv[1:7]
master, slave = pty.openpty()
agent = subprocess.Popen([binary, "agent", "--socket", socket_path, "--confirm", *sys.argv[7:]],
                         stdin=slave, stdout=subprocess.PIPE, stderr=slave)
lines = b""
while b"echo Agent pid" not in lines:
    chunk = agent.stdout.readline()
    if not chunk:
        sys.exit("the agent did not start")
    lines += chunk

environment = {k: v for k, v in os.environ.items() if not k.startswith("TOKENCACHE_") or k == "TOKENCACHE_LOG_FILE"}
environment.pop("DBUS_SESSION_BUS_ADDRESS", None)
environment.update(HOME=home, XDG_DATA_HOME=home + "/data", XDG_CONFIG_HOME=home + "/config",
                   TOKENCACHE_AGENT_SOCK=socket_path, NO_COLOR="1")
terminal = b""


def read_terminal_until(marker, timeout=30):
    global terminal
    deadline = time.time() + timeout
    while marker not in terminal and time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            terminal += os.read(master, 4096)
    return marker in terminal


def token(scopes, answer=None, who=account):
    global terminal
    run = subprocess.Popen([binary, "token", "--client", client, "--scopes", scopes, "--account", who], env=environment,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    asked = None
    if answer is not None:
        asked = read_terminal_until(b"[y/N] ")
        terminal = terminal.replace(b"[y/N] ", b"[y/N] (answered)", 1)
        os.write(master, answer + b"\n")
    out, err = run.communicate(timeout=60)
    return {"status": run.returncode, "stdout": out.decode(), "stderr": err.decode(), "asked": asked}


result = {"first": token("User.Read", b"y"), "again": token("User.Read"), "denied": token("Mail.Read", b"n"),
          "other": token("User.Read", b"n", other_account)}
agent.terminate()
agent.wait(timeout=30)
read_terminal_until(b"\x00", timeout=0.5)
result["terminal"] = terminal.decode(errors="replace")
print(json.dumps(result))
