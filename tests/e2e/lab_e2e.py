#!/usr/bin/python3
"""End to end on the lab (README.md): svcgate in namespace gw on net_af_xdp ports, real
programs in the other namespaces. Prints "ok   ..." / "FAIL ..." per check; exits 1 on a failure.

usage: lab_e2e.py SVCGATE SOURCE_DIR
The lab's Services (config/lab.yaml) plus tests/e2e/extra-services.yaml (Kubernetes objects): a
ClientIP-affinity Service, a UDP NodePort, and a Service without endpoints, all dual-stack; the
checks run over IPv4 and again over IPv6.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
ns, curl = checks.ns, checks.curl


def lab(script):
    return checks.lab(src, script)


def scrape(addr):
    """GET /metrics inside gw: the text, and {series with labels: value} of its samples."""
    text = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5", f"http://{addr}/metrics"],
                          capture_output=True, text=True, timeout=30).stdout
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return text, samples


def refused(vip):
    """Connects over TCP and sends a UDP datagram to vip (a Service without endpoints) from
    lab-sleeper: [tcp outcome, seconds, udp outcome, seconds]."""
    code = r"""
import socket, sys, time
vip = sys.argv[1]
fam = socket.AF_INET6 if ":" in vip else socket.AF_INET
t = time.monotonic()
s = socket.socket(fam); s.settimeout(5)
try:
    s.connect((vip, 80)); r = "connected"
except ConnectionRefusedError: r = "refused"
except OSError as e: r = type(e).__name__
tcp = (r, time.monotonic() - t)
t = time.monotonic()
u = socket.socket(fam, socket.SOCK_DGRAM); u.settimeout(5)
u.connect((vip, 53)); u.send(b"x")
try:
    u.recv(100); r = "answered"
except ConnectionRefusedError: r = "refused"
except OSError as e: r = type(e).__name__
print(tcp[0], round(tcp[1], 3), r, round(time.monotonic() - t, 3))
"""
    r = ns("lab-sleeper", "/usr/bin/python3", "-c", code, vip, timeout=30)
    return r.stdout.decode().split()


if os.geteuid() != 0:
    print("FAIL the end-to-end test needs root (network namespaces)")
    sys.exit(1)

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["kubernetes"] = {"manifests": [os.path.join(src, "tests", "e2e", "extra-services.yaml")]}
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-e2e-", delete=False)
yaml.safe_dump(cfg, tmp)
tmp.close()

try:
    r = lab(f"lab_up && lab_start_apps && lab_start_gateway {svcgate} {tmp.name}")
    check(r.returncode == 0, f"lab up, svcgate running in namespace gw ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)
    sock = cfg["control"]["socket"]
    ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")
    mbufs = checks.accounting(ctl_bin, sock, "at start")

    # The Service paths, once per family (the lab is dual-stack): the same Services through the
    # IPv4 and the IPv6 NodePort and ClusterIPs. `a` names the address as curl takes it.
    FAMILIES = [
        dict(tag="", nodeport="192.168.67.8", nodeport_a="192.168.67.8", vip="10.107.169.79", dns="10.96.0.10",
             sticky="10.96.100.1", qtype="A", answer="10.107.169.79", pod="10.244.2.4"),
        dict(tag="IPv6 ", nodeport="fd00:67::8", nodeport_a="[fd00:67::8]", vip="[fd00:96::79]", dns="fd00:96::a",
             sticky="[fd00:96::a:1]", qtype="AAAA", answer="fd00:96::79", pod="fd00:244:2::4"),
    ]
    # The client reaches the pod network through the gateway (routed, no Service): IPv6 has its
    # default route there already.
    ns("client", "ip", "route", "add", "10.244.0.0/16", "via", "192.168.67.8")
    UDP_ECHO = """
import os, socket, sys
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
data = os.urandom(n)
for _ in range(3):
    s.sendto(data, (addr, port))
    try:
        back = s.recv(65535)
    except socket.timeout:
        continue
    print("intact" if back == data else f"changed: {len(back)} bytes back")
    sys.exit(0)
print("no answer")
"""
    size = 10 * 1024 * 1024
    for f in FAMILIES:
        tag = f["tag"]
        # TCP through NodePort and ClusterIP.
        answers = [curl("client", f"http://{f['nodeport_a']}:30001/") for _ in range(12)]
        check(all(a and a.startswith("test-pod-") for a in answers), f"{tag}TCP via NodePort: 12 of 12 answered ({answers})")
        answers = [curl("lab-sleeper", f"http://{f['vip']}/") for _ in range(12)]
        check(all(a and a.startswith("test-pod-") for a in answers), f"{tag}TCP via ClusterIP: 12 of 12 answered ({answers})")
        # UDP through ClusterIP (kube-dns) and a NodePort (dns-np), answered by the real DNS server;
        # then DNS over TCP (an A query over either family).
        dig = ns("lab-sleeper", "dig", "+short", "+time=2", "+tries=2", f["qtype"], "@" + f["dns"],
                 "test-svc.default.svc.cluster.local")
        check(dig.stdout.decode().strip() == f["answer"], f"{tag}UDP via ClusterIP: DNS {f['qtype']} answered ({dig.stdout!r})")
        dig = ns("client", "dig", "+short", "+time=2", "+tries=2", "-p", "30053", f["qtype"], "@" + f["nodeport"],
                 "test-svc.default.svc.cluster.local")
        check(dig.stdout.decode().strip() == f["answer"], f"{tag}UDP via NodePort 30053: DNS answered ({dig.stdout!r})")
        dig = ns("lab-sleeper", "dig", "+tcp", "+short", "+time=2", "+tries=2", "@" + f["dns"],
                 "test-svc.default.svc.cluster.local")
        check(dig.stdout.decode().strip() == "10.107.169.79", f"{tag}DNS over TCP via ClusterIP answered ({dig.stdout!r})")
        # Fragments (README, Reliability). A TXT answer of 3,300 bytes over UDP (EDNS 4096, no
        # retry over TCP) leaves the DNS pod in fragments and comes back from the ClusterIP whole.
        dig = ns("lab-sleeper", "dig", "+short", "+time=2", "+tries=2", "+bufsize=4096", "+ignore", "TXT",
                 "@" + f["dns"], "big.default.svc.cluster.local")
        txt = "".join(re.findall(r'"([^"]*)"', dig.stdout.decode()))
        want = "".join(chr(97 + i % 26) for i in range(3300))
        check(txt == want, f"{tag}UDP via ClusterIP: a 3,300-byte TXT answer arrives whole over UDP ({len(txt)} bytes)")
        # 8,000 bytes each way through a NodePort: fragmented by the client and by the pod.
        echo = ns("client", "/usr/bin/python3", "-c", UDP_ECHO, f["nodeport"], "30007", "8000", timeout=30)
        check(echo.returncode == 0 and echo.stdout.decode().strip() == "intact",
              f"{tag}UDP via NodePort: 8,000 bytes each way arrive intact ({echo.stdout.decode().strip()} {echo.stderr.decode()[-200:]})")
        # A ping of 3,000 bytes to a pod, routed through the gateway: fragments both ways.
        r = ns("client", "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "3000", f["pod"], timeout=20)
        got = [l for l in r.stdout.decode().splitlines() if "packets transmitted" in l]
        check(r.returncode == 0 and got and " 3 received" in got[0], f"{tag}ping -s 3000 to a pod through the gateway: {got}")
        # A 10 MB transfer arrives intact (the server sends its digest in a header).
        r = ns("client", "curl", "-s", "-m", "60", "-D", "-", f"http://{f['nodeport_a']}:30001/blob/{size}", timeout=90)
        head, _, body = r.stdout.partition(b"\r\n\r\n")
        want = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-sha256:")]
        check(r.returncode == 0 and len(body) == size and want and hashlib.sha256(body).hexdigest() == want[0],
              f"{tag}10 MB over NodePort arrives intact ({len(body)} bytes)")
        # Stickiness: one keep-alive connection, many requests, one pod.
        out = curl("client", *[f"http://{f['nodeport_a']}:30001/"] * 20)
        pods = set((out or "").split())
        check(out is not None and len(out.split()) == 20 and len(pods) == 1,
              f"{tag}one keep-alive connection: 20 requests, one pod ({pods})")
        # Session affinity ClientIP: separate connections from one client stay on one pod.
        seen = {curl("lab-sleeper", f"http://{f['sticky']}/") for _ in range(15)}
        check(len(seen) == 1 and None not in seen, f"{tag}sessionAffinity ClientIP: 15 connections, one pod ({seen})")
        # Hairpin: a test pod reaching test-svc and landing on itself (masqueraded, so the reply
        # comes back through the gateway).
        seen = [curl("test-pod-1", f"http://{f['vip']}/") for _ in range(30)]
        check(None not in seen and "test-pod-1\n" in seen,
              f"{tag}hairpin: test-pod-1 reaches itself via the VIP ({seen.count('test-pod-1' + chr(10))} of 30)")
        # Same node: lab-sleeper reaching the test pod on its own node through the VIP.
        seen = [curl("lab-sleeper", f"http://{f['vip']}/") for _ in range(30)]
        check(None not in seen and "test-pod-3\n" in seen,
              f"{tag}same node: lab-sleeper reaches test-pod-3 ({seen.count('test-pod-3' + chr(10))} of 30)")

    # Fragments went through, and none was refused or left waiting.
    st = checks.gateway_stats(ctl_bin, sock)
    frag_drops = {k: v for k, v in st.get("drops", {}).items() if k.startswith("frag_") and v}
    check(st.get("fragments", {}).get("held") == 0 and not frag_drops,
          f"fragments: none held at the end, none dropped ({st.get('fragments')}, {frag_drops})")

    # No endpoints: fail fast (RST for TCP, ICMP port-unreachable for UDP), not on a timeout.
    for vip in ("10.96.100.2", "fd00:96::a:2"):
        out = refused(vip)
        check(len(out) == 4 and out[0] == "refused" and float(out[1]) < 1.0,
              f"no endpoints, TCP to {vip}: connection refused by RST in {out[1] if len(out) == 4 else '?'} s")
        check(len(out) == 4 and out[2] == "refused" and float(out[3]) < 1.0,
              f"no endpoints, UDP to {vip}: port unreachable in {out[3] if len(out) == 4 else '?'} s")

    # The gateway answers ping on its own addresses: the client port's, and the cluster port's
    # from a pod's node.
    for name, addr in (("client", "fd00:67::8"), ("lab-sleeper", "fd00:192::2"), ("client", "192.168.67.8")):
        r = ns(name, "ping", "-c", "3", "-i", "0.2", "-W", "1", addr, timeout=20)
        got = [l for l in r.stdout.decode().splitlines() if "packets transmitted" in l]
        check(r.returncode == 0 and got and " 3 received" in got[0], f"ping {addr} from {name}: {got[0] if got else r.stdout!r}")

    # Tools of the trade: dpdk-telemetry.py sees svcgate's commands and its ports (dpdk-dumpcap
    # below).
    tel = subprocess.run(["ip", "netns", "exec", "gw", "dpdk-telemetry.py", "-f", "svcgate-lab"],
                         input="/svcgate/stats\n/ethdev/stats,0\n", capture_output=True, text=True, timeout=30)
    replies = {}
    for line in tel.stdout.splitlines():
        if line.startswith("{") and '"version"' not in line:
            replies.update(json.loads(line))
    st = replies.get("/svcgate/stats", {})
    check(st.get("dnat", 0) > 0 and st.get("flows_created", 0) > 0, f"dpdk-telemetry.py /svcgate/stats ({st.get('dnat')} dnat)")
    check(replies.get("/ethdev/stats", {}).get("ipackets", 0) > 0, "dpdk-telemetry.py /ethdev/stats,0")

    # At full speed: 100 MB through the NodePort and a 10,000-packet ping flood of the gateway,
    # and no frame missed by either port (issue 36: net_pcap missed 13-16% of the cluster port's).
    # A busy CI host (the package build runs beside these tests) may starve the worker for longer
    # than a ring holds: up to 0.01% is allowed, and the count is printed.
    def missed():
        return {name: (p.get("rx_packets", 0), p.get("rx_missed", 0))
                for name, p in checks.gateway_stats(ctl_bin, sock).get("ports", {}).items()}
    m0 = missed()
    big = 100 * 1000 * 1000
    r = ns("client", "curl", "-s", "-m", "100", "-D", "-", f"http://192.168.67.8:30001/blob/{big}", timeout=120)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    want = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-sha256:")]
    check(len(body) == big and want and hashlib.sha256(body).hexdigest() == want[0],
          f"100 MB over the NodePort at full speed arrives intact ({len(body)} bytes)")
    r = ns("client", "ping", "-f", "-c", "10000", "-W", "1", "192.168.67.8", timeout=120)
    lost = [l for l in r.stdout.decode().splitlines() if "packets transmitted" in l]
    check(r.returncode == 0 and lost and " 10000 received" in lost[0], f"a 10,000-packet ping flood: {lost}")
    m1 = missed()
    for port in ("ext", "cluster"):
        rx = m1[port][0] - m0[port][0]
        miss = m1[port][1] - m0[port][1]
        check(rx > 10000 and miss * 10000 <= rx + miss,
              f"port {port}: {miss} of {rx + miss} frames missed at full speed (at most 0.01%)")

    checks.accounting(ctl_bin, sock, "after TCP, UDP, 10 MB, 100 MB, affinity, hairpin, rejects, pings", mbufs)

    # svcgatectl over the control socket, and the Prometheus endpoint.

    def ctl(*args):
        return subprocess.run([ctl_bin, "--socket", sock, *args], capture_output=True, text=True, timeout=30)

    mode = oct(os.stat(sock).st_mode & 0o777)
    check(mode == "0o600", f"control socket {sock} has mode 0600 ({mode})")
    r = ctl("status")
    check(r.returncode == 0 and "generation 1" in r.stdout and "link up" in r.stdout, "svcgatectl status")
    r = ctl("status", "--json")
    st = json.loads(r.stdout) if r.returncode == 0 else {}
    check(st.get("generation") == 1 and st.get("service_ports", 0) >= 7 and len(st.get("ports", [])) == 2,
          f"svcgatectl status --json ({st.get('service_ports')} service ports)")
    r = ctl("services", "--json")
    # A dual-stack Service is one service port per family, under one name.
    svcs = {(x["name"], x["family"]): x for x in json.loads(r.stdout)} if r.returncode == 0 else {}
    t = svcs.get(("default/test-svc:http", "IPv4"), {})
    t6 = svcs.get(("default/test-svc:http", "IPv6"), {})
    check(t.get("packets", 0) > 0 and t.get("node_port") == 30001 and t.get("ready") == 3 and
          t6.get("cluster_ip") == "fd00:96::79" and t6.get("ready") == 3,
          f"svcgatectl services --json: test-svc has 3 ready endpoints per family and {t.get('packets')} IPv4 packets")
    r = ctl("endpoints")
    check(r.returncode == 0 and r.stdout.count("default/test-svc:http") == 6 and "ready,serving" in r.stdout and
          "[fd00:244:2::4]:80" in r.stdout,
          "svcgatectl endpoints: a table with test-svc's three endpoints of each family")
    r = ctl("flows", "--service", "default/test-svc", "--limit", "3", "--json")
    fl = json.loads(r.stdout) if r.returncode == 0 else []
    check(0 < len(fl) <= 3 and all(f["service"] == "default/test-svc:http" for f in fl),
          f"svcgatectl flows --service --limit ({len(fl)} flows)")
    r = ctl("stats", "--json")
    sj = json.loads(r.stdout) if r.returncode == 0 else {}
    check(sj.get("verdicts", {}).get("dnat", 0) > 0 and "ext" in sj.get("ports", {}) and "endpoints" in sj,
          "svcgatectl stats --json: per port, per verdict, per drop reason, per service and endpoint")
    r = ctl("flows", "--limit", "x")
    check(r.returncode == 2 and "not a number" in r.stderr, "svcgatectl: a bad argument gets a clear error")
    r = ctl("status", "--timeout", "5")
    check(r.returncode == 2 and "--timeout is for drain" in r.stderr, f"svcgatectl status --timeout: refused ({r.stderr.strip()})")
    r = ctl("drain", "--timeout", "0")
    check(r.returncode == 2 and "is not a number of seconds" in r.stderr and "draining" not in ctl("status").stdout,
          "svcgatectl drain --timeout 0: refused, nothing drained")
    metrics, samples = scrape(cfg["control"]["metrics"])
    key = 'svcgate_service_packets_total{service="default/test-svc",port="http",protocol="TCP",family="IPv4"}'
    check(samples.get(key, 0) > 0 and samples.get('svcgate_flow_capacity{family="IPv4"}', 0) == 1048576 and
          'svcgate_drops_total{reason="to_gateway"}' in samples and
          any(k.startswith("svcgate_endpoint_bytes_total{") for k in samples),
          f"curl /metrics: {len(samples)} samples parsed, test-svc {samples.get(key)} packets")
    # Silent HTTP clients (connect, send nothing) hold metrics-server threads, never the control
    # thread or a worker: svcgatectl and the Services answer at once, /metrics once they time out.
    host, port = cfg["control"]["metrics"].rsplit(":", 1)
    silent = subprocess.Popen(["ip", "netns", "exec", "gw", "/usr/bin/python3", "-c",
                               "import socket, sys, time\n"
                               "s = [socket.create_connection((sys.argv[1], int(sys.argv[2]))) for _ in range(4)]\n"
                               "print('connected', flush=True)\ntime.sleep(4)", host, port],
                              stdout=subprocess.PIPE, text=True)
    try:
        check(silent.stdout.readline().strip() == "connected", "four silent clients connected to /metrics")
        t0 = time.monotonic()
        r = ctl("status")
        took = time.monotonic() - t0
        # While they hang: well before the metrics server's 2 s read timeout lets the first of them go.
        check(r.returncode == 0 and took < 1.5, f"svcgatectl status answers while they hang ({took:.3f} s)")
        answer = (curl("client", "http://192.168.67.8:30001/") or "").strip()
        check(answer in checks.TEST_PODS, f"the NodePort answers while they hang ({answer})")
        m = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "8", "-o", "/dev/null", "-w", "%{http_code}",
                            "http://" + cfg["control"]["metrics"] + "/metrics"], capture_output=True, text=True)
        check(m.stdout == "200", f"/metrics answers once the silent ones time out (HTTP {m.stdout})")
    finally:
        silent.kill()
        silent.wait()
    reload_at = time.time()
    r = ctl("reload")
    check(r.returncode == 0 and "generation 2" in r.stdout, "svcgatectl reload")
    # What an operator alerts on: the reload histogram and the last success (kube-proxy's
    # sync_proxy_rules_duration_seconds / _last_timestamp_seconds), link state, build info.
    metrics, samples = scrape(cfg["control"]["metrics"])
    check(samples.get("svcgate_reload_duration_seconds_count") == 1 and
          samples.get('svcgate_reload_duration_seconds_bucket{le="+Inf"}') == 1 and
          0 < samples.get("svcgate_reload_duration_seconds_sum", 0) < 5 and
          "# TYPE svcgate_reload_duration_seconds histogram" in metrics,
          "/metrics: the reload is in svcgate_reload_duration_seconds (a histogram)")
    last = samples.get("svcgate_reload_last_success_timestamp_seconds", 0)
    check(reload_at - 1 <= last <= time.time() + 1, f"/metrics: the last successful reload's time ({last} against {reload_at:.3f})")
    check(samples.get('svcgate_port_link_up{port="ext"}') == 1 and samples.get('svcgate_port_link_up{port="cluster"}') == 1,
          "/metrics: both ports' links up")
    check(any(k.startswith('svcgate_build_info{version="') and 'dpdk="DPDK 22.11' in k and v == 1 for k, v in samples.items()),
          f"/metrics: svcgate_build_info ({[k for k in samples if k.startswith('svcgate_build_info')]})")
    # The exposition as Prometheus' own linter reads it.
    pt = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True, timeout=30)
    check(pt.returncode == 0, f"promtool check metrics accepts /metrics ({(pt.stdout + pt.stderr).strip()[:300]})")
    # contrib/grafana/svcgate.json names only series svcgate exports.
    dash = json.load(open(os.path.join(src, "contrib", "grafana", "svcgate.json")))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exported = {k.split("{")[0] for k in samples}
    named = {m for e in exprs for m in re.findall(r"\bsvcgate_[a-z0-9_]+", e)}
    check(exprs and named and named <= exported, f"every series the Grafana dashboard queries is exported ({sorted(named - exported)} missing)")
    # A real Prometheus (Debian's) scraping svcgate in the lab, asked over its HTTP API.
    prom_dir = tempfile.mkdtemp(prefix="svcgate-prom-")
    with open(os.path.join(prom_dir, "prometheus.yml"), "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                f"scrape_configs:\n  - job_name: svcgate\n    static_configs: [{{targets: ['{cfg['control']['metrics']}']}}]\n")
    prom = subprocess.Popen(["ip", "netns", "exec", "gw", "timeout", "60", "prometheus",
                             f"--config.file={prom_dir}/prometheus.yml", f"--storage.tsdb.path={prom_dir}/data",
                             "--web.listen-address=127.0.0.1:9090", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def promq(q):
            r = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5", "--get",
                                "--data-urlencode", f"query={q}", "http://127.0.0.1:9090/api/v1/query"],
                               capture_output=True, text=True, timeout=10)
            try:
                res = json.loads(r.stdout)["data"]["result"]
                return float(res[0]["value"][1]) if res else None
            except (ValueError, KeyError, IndexError):
                return None
        deadline = time.monotonic() + 20
        rate = last = None
        while time.monotonic() < deadline and not (rate and last):
            for _ in range(5):
                curl("client", "http://192.168.67.8:30001/")
            time.sleep(0.5)
            rate = promq('sum(rate(svcgate_packets_total{verdict="dnat"}[5s]))')
            last = promq("svcgate_reload_last_success_timestamp_seconds")
        check(rate is not None and rate > 0, f"Prometheus scraping svcgate: a DNAT packet rate ({rate} packets/s)")
        check(last is not None and abs(last - samples.get("svcgate_reload_last_success_timestamp_seconds", 0)) < 1,
              f"Prometheus: the last successful reload's time ({last})")
    finally:
        prom.terminate()  # `timeout` passes SIGTERM on to prometheus (a SIGKILL would orphan it)
        try:
            prom.wait(timeout=10)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        subprocess.run(["pkill", "-f", f"storage.tsdb.path={prom_dir}/data"], capture_output=True)
        shutil.rmtree(prom_dir, ignore_errors=True)

    # dpdk-dumpcap captures on a port while svcgate runs (a secondary process of its own), on the
    # wall clock: the client's tcpdump of the same packets says the same time. A SYN-ACK is stamped
    # by the gateway as it sends it and by the client as it arrives: the same moment within a
    # millisecond (the clock's check). A SYN is stamped by the client as it leaves and by the gateway
    # when its worker receives it: never before, and later by the worker's idle sleep
    # (dataplane.poll: about 1 ms at most) plus, with tools/test's other tests beside it on two
    # cores, its scheduling (3.1 ms seen): bounded at 100 ms, far below any clock error.
    pcap = tempfile.mktemp(suffix=".pcapng", prefix="svcgate-e2e-")
    cpcap = tempfile.mktemp(suffix=".pcap", prefix="svcgate-e2e-client-")
    td = subprocess.Popen(["ip", "netns", "exec", "client", "tcpdump", "-U", "-n", "-i", "eth0",
                           "--time-stamp-precision=nano", "-w", cpcap, "tcp port 30001"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dc = subprocess.Popen(["ip", "netns", "exec", "gw", "dpdk-dumpcap", "--file-prefix=svcgate-lab", "-q", "-i",
                           "net_af_xdp0", "-w", pcap, "-c", "80"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    t0 = time.monotonic()  # until it has its packets: it attaches in its own time (60 s at most)
    while dc.poll() is None and time.monotonic() - t0 < 60:
        subprocess.run(["sleep", "0.3"])
        curl("client", "http://192.168.67.8:30001/")
    if dc.poll() is None:
        dc.kill()
    dc.wait()
    td.terminate()
    td.wait()
    shown = subprocess.run(["tcpdump", "-n", "-r", pcap], capture_output=True, text=True).stdout
    check("192.168.67.8.30001" in shown, f"dpdk-dumpcap captures on port ext ({len(shown.splitlines())} packets)")

    def stamped(path, flt, key):
        """{key: epoch seconds} of the packets matching `flt` in a capture."""
        out = subprocess.run(["tcpdump", "-tt", "-n", "--time-stamp-precision=nano", "-r", path, flt],
                             capture_output=True, text=True).stdout
        found = {}
        for line in out.splitlines():
            m = re.match(r"(\d+\.\d+) IP .*" + key, line)
            if m:
                found[m.group(2)] = float(m.group(1))
        return found
    syn, synack = "tcp[tcpflags] == tcp-syn and dst port 30001", "tcp[tcpflags] == tcp-syn|tcp-ack and src port 30001"
    for what, flt, key, lo, hi in (("SYN-ACKs", synack, r"seq (\d+),", -1e-3, 1e-3),
                                   ("SYNs", syn, r"seq (\d+),", -0.2e-3, 100e-3)):
        gw, cl = stamped(pcap, flt, key), stamped(cpcap, flt, key)
        both = sorted(set(gw) & set(cl))
        d = sorted(gw[q] - cl[q] for q in both)
        check(len(both) >= 2 and lo <= d[0] and d[-1] <= hi,
              f"dpdk-dumpcap's capture is on the wall clock: {len(both)} {what} in both captures, gateway - client "
              f"{', '.join(f'{x * 1e6:.0f}' for x in d[:12])} us (bounds {lo * 1e6:.0f} to {hi * 1e6:.0f})")
    for f in (pcap, cpcap):
        if os.path.exists(f):
            os.unlink(f)
    r = ctl("status")
    check(r.stdout.count("link up") == 2, "after dpdk-dumpcap left, both ports' links are still up")
    for f in (pcap, cpcap):
        if os.path.exists(f):
            os.unlink(f)

    # Reload on a file change (inotify): rewrite the config, no signal.
    before = lab("cat $LAB_RUN/svcgate.log").stdout.count("(file change)")
    with open(tmp.name) as f:
        text = f.read()
    with open(tmp.name, "w") as f:
        f.write(text)
    changed = False
    for _ in range(40):
        if lab("cat $LAB_RUN/svcgate.log").stdout.count("(file change)") > before:
            changed = True
            break
        subprocess.run(["sleep", "0.1"])
    check(changed, "a change to the config file reloads it (inotify)")

    # Reload on SIGHUP: a broken config is refused and the running one keeps serving; a good one
    # is published.
    def hup_and_wait(marker):
        before = lab("cat $LAB_RUN/svcgate.log").stdout.count(marker)
        lab("kill -HUP $(cat $LAB_RUN/svcgate.pid)")
        for _ in range(50):
            if lab("cat $LAB_RUN/svcgate.log").stdout.count(marker) > before:
                return True
            subprocess.run(["sleep", "0.1"])
        return False

    good = open(tmp.name).read()
    with open(tmp.name, "w") as f:
        f.write("dataplane: [\n")
    check(hup_and_wait("the running config stays"), "SIGHUP with a broken config: refused, logged")
    check((curl("client", "http://192.168.67.8:30001/") or "").startswith("test-pod-"), "after the refused reload: still serving")
    r = ctl("status")
    check("REFUSED" in r.stdout and tmp.name in r.stdout, "svcgatectl status shows the refused config and why")
    with open(tmp.name, "w") as f:
        f.write(good)
    check(hup_and_wait("reloaded"), "SIGHUP with a good config: reloaded")
    check((curl("client", "http://192.168.67.8:30001/") or "").startswith("test-pod-"), "after the reload: serving")
    r = lab("lab_stop_gateway; cat $LAB_RUN/svcgate.log")
    check("packets in" in r.stdout and "verdict dnat" in r.stdout, "SIGINT: svcgate stops and prints its counters")

    # Two workers: a veth has one queue, so port ext is polled by worker 0 and port cluster by
    # worker 1 - every connection's two directions are handled by different workers, through the
    # one shared flow table. (Three lcores on this machine's CPUs: main, two workers.)
    cfg["dataplane"]["workers"] = 2
    with open(tmp.name, "w") as f:
        yaml.safe_dump(cfg, f)
    ncpu = os.cpu_count() or 1
    lcores = ",".join(f"{i}@{i % ncpu}" for i in range(3))
    r = lab(f"lab_start_gateway {svcgate} {tmp.name} --lcores={lcores}")
    check(r.returncode == 0, "two workers: svcgate running")
    mbufs = checks.accounting(ctl_bin, sock, "two workers at start")
    answers = [curl("client", "http://192.168.67.8:30001/") for _ in range(10)]
    check(all(a and a.startswith("test-pod-") for a in answers), "two workers: 10 of 10 NodePort requests answered")
    r = ns("client", "curl", "-s", "-m", "60", "-D", "-", f"http://192.168.67.8:30001/blob/{size}", timeout=90)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    want = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-sha256:")]
    check(len(body) == size and want and hashlib.sha256(body).hexdigest() == want[0],
          "two workers: 10 MB arrives intact, directions on different workers")
    checks.accounting(ctl_bin, sock, "two workers after 10 MB", mbufs)
finally:
    checks.lab_end(src, tmp.name)

checks.finish("end-to-end lab test")
