#!/usr/bin/python3
"""One command table (control/api/command_table.h): `svcgatectl --help`, its bash completion and a
running daemon's control socket know exactly the same commands and options; the daemon answers
every request in JSON (command_table.h's protocol), and svcgatectl's exit status follows the
answer (0 done, 1 failed, 2 refused).

usage: commands_test.py SVCGATE"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate = sys.argv[1]
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")


def run(*args):
    return subprocess.run([ctl, *args], capture_output=True, text=True, timeout=30)


# svcgatectl --help: "  NAME [...]  help" lines under the two headings.
usage = run("--help").stdout
remote_help, local_help, section = set(), set(), None
for line in usage.splitlines():
    if line.startswith("Commands a running svcgate"):
        section = remote_help
    elif line.startswith("Commands svcgatectl runs itself"):
        section = local_help
    elif line.startswith("Options:"):
        section = None
    elif section is not None and re.match(r"^  [a-z]", line):
        section.add(line.split()[0])
check(len(remote_help) >= 8 and "trace" in local_help, f"--help lists remote {sorted(remote_help)}, local {sorted(local_help)}")

# The completion script, as bash runs it.
comp = run("completion").stdout
with tempfile.NamedTemporaryFile("w", suffix=".bash", delete=False) as f:
    f.write(comp)


def complete(*words):
    script = (f"source {f.name}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
              "_svcgatectl; echo \"${COMPREPLY[*]}\"")
    return set(subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30).stdout.split())


completed = {w for w in complete("svcgatectl", "") if not w.startswith("-")}
check(completed == remote_help | local_help, f"completion offers exactly --help's commands ({sorted(completed)})")
# Each command's options: --help's synopsis against completion's.
for name in sorted(remote_help | local_help):
    syn = re.search(rf"^  {name}\b(.*)$", usage, re.M)  # the synopsis, then its help (no "[--" in it)
    flags = set(re.findall(r"\[(--[a-z-]+)", syn.group(1) if syn else ""))
    got = {w for w in complete("svcgatectl", name, "--") if w != "--help"}
    check(got == flags, f"completion of {name} offers its --help options {sorted(flags)} ({sorted(got)})")

with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "gw.yaml")
    with open(cfg, "w") as f2:
        f2.write("dataplane:\n  eal: [--no-huge, --no-shconf, -m, '256', --no-pci, --no-telemetry]\n"
                 "  mbufs: 4096\n  flow_table: {capacity: 4096, capacity_v6: 1024}\n"
                 "  ports: [{name: a, device: 'net_null0,no-rx=1', addresses: [10.9.0.1/24]}]\n"
                 f"control: {{socket: {d}/s.sock, metrics: off, watch: false}}\n"
                 "services:\n  - {name: a/b, cluster_ip: 10.96.0.1, ports: [{port: 80}], endpoints: [10.9.0.2]}\n")
    p = subprocess.Popen([svcgate, "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = f"{d}/s.sock"
        deadline = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)

        def ask(line):
            """The daemon's raw answer to one request line, parsed."""
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(20)
            s.connect(sock)
            s.sendall(line.encode() + b"\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            s.close()
            return json.loads(data)

        # The daemon's own list: an unknown command is refused with the names it answers.
        a = ask("no-such-command")
        listed = set(re.search(r"\((.*)\)", a.get("error", "")).group(1).split(", ")) if a.get("error") else set()
        check(a.get("ok") is False and a.get("bad_request") is True and listed == remote_help,
              f"the daemon answers exactly --help's remote commands ({sorted(listed)})")
        for name in sorted(remote_help - {"drain", "undrain", "reload"}):
            a = ask(name)
            check(a.get("ok") is True and "result" in a, f"the daemon answers {name} in JSON")
        a = ask("status --limit 3")
        check(a.get("bad_request") is True and "--limit is for flows" in a.get("error", ""),
              f"an option of another command is refused, named ({a.get('error')})")
        a = ask("flows --limit")
        check(a.get("bad_request") is True and "needs a value" in a.get("error", ""), f"a missing value is refused ({a.get('error')})")
        # A client slow to send its request (a loaded machine can keep a just-started svcgatectl
        # off the CPU for a while) is answered when its line comes, and holds no other client back.
        slow = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]
        for c in slow:
            c.settimeout(20)
            c.connect(sock)
        t0 = time.monotonic()
        r = run("--socket", sock, "status", "--json")
        quick = time.monotonic() - t0
        check(r.returncode == 0 and quick < 1.0, f"three silent clients do not hold svcgatectl back (before: 0.5 s each) ({quick:.2f} s)")
        time.sleep(1.5)
        slow[0].sendall(b"sta")
        time.sleep(0.5)
        slow[0].sendall(b"tus\n")
        data = b""
        while chunk := slow[0].recv(65536):
            data += chunk
        late = json.loads(data) if data.startswith(b"{") else {}
        check(late.get("ok") is True and "generation" in late.get("result", {}),
              f"a request sent 2 s after connecting, in two parts, is answered ({data[:80]!r})")
        for c in slow:
            c.close()
        # svcgatectl's exit status follows the answer.
        r = run("--socket", sock, "flows", "--limit", "x")
        check(r.returncode == 2 and "not a number" in r.stderr and r.stdout == "", f"refused: exit 2, the reason on stderr ({r.stderr.strip()})")
        r = run("--socket", sock, "status", "--json")
        st = json.loads(r.stdout) if r.returncode == 0 else {}
        check(st.get("generation") == 1 and st.get("kubernetes", {}).get("manifests") == 0, "status --json: the result, exit 0")
        r = run("--socket", sock, "status")
        check(r.returncode == 0 and f"config      {cfg} (generation 1)" in r.stdout and "health      " in r.stdout,
              "status: the same answer as a table")
        r = run("--socket", sock, "stats")
        check(r.returncode == 0 and "VERDICT" in r.stdout and "SERVICE PORT" in r.stdout and "a/b:" in r.stdout,
              "stats: ports, verdicts and the Service tables as text")
        with open(cfg, "a") as f3:
            f3.write("  - {name: a/c, cluster_ip: 10.96.0.300, ports: [{port: 80}]}\n")
        r = run("--socket", sock, "reload")
        check(r.returncode == 1 and "10.96.0.300" in r.stdout, f"a refused reload: exit 1, the reason shown ({r.stdout.strip()[:120]})")
        r = run("--socket", sock, "reload", "--json")
        rj = json.loads(r.stdout) if r.stdout else {}
        check(r.returncode == 1 and rj.get("ok") is False and rj.get("generation") == 1, "reload --json: ok false, generation kept")
        # An unknown (misspelt) key refuses the reload too, positioned, with the nearest key; the
        # running config keeps serving.
        with open(cfg) as f3:
            good = f3.read().replace("  - {name: a/c, cluster_ip: 10.96.0.300, ports: [{port: 80}]}\n", "")
        with open(cfg, "w") as f3:
            f3.write("cluster:\n  masquerade_al: true\n" + good)
        r = run("--socket", sock, "reload")
        check(r.returncode == 1 and f"{cfg}:2:3: cluster.masquerade_al: unknown setting; did you mean \"masquerade_all\"?"
              in r.stdout, f"a reload with an unknown key is refused, positioned, with a suggestion ({r.stdout.strip()[:160]})")
        svc = json.loads(run("--socket", sock, "services", "--json").stdout or "[]")
        st = json.loads(run("--socket", sock, "status", "--json").stdout or "{}")
        check(st.get("generation") == 1 and any(x["name"].startswith("a/b") for x in svc),
              f"after the refused reload the running config still serves (generation {st.get('generation')})")
    finally:
        p.terminate()
        p.wait(timeout=30)
os.unlink(f.name)
checks.finish("one command table")
