#!/usr/bin/python3
"""svcgate's command line: --check reports every error with file:line:column and exits non-zero;
a good config checks OK; bad command lines get a usage error, not a crash."""
import os
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]




def run(*args):
    return subprocess.run([svcgate, *args], capture_output=True, text=True, timeout=60)


r = run("--config", os.path.join(src, "config", "lab.yaml"), "--check")
check(r.returncode == 0 and "OK: 8 service ports" in r.stdout, f"lab.yaml checks OK ({r.stdout.strip()} {r.stderr.strip()})")

with tempfile.TemporaryDirectory() as d:
    bad = os.path.join(d, "bad.yaml")
    with open(bad, "w") as f:
        f.write("""cluster:
  node_ips: [10.0.0.300]
  cluster_cidrs: [10.0.0.0/40]
services:
  - name: a/b
    cluster_ip: 10.96.0.1
    ports: [{port: 0}]
    colour: blue
""")
    r = run("--config", bad, "--check")
    check(r.returncode == 1, f"a broken config: exit 1 (got {r.returncode})")
    for want in (f"{bad}:2:14: cluster.node_ips[0]", f"{bad}:3:19: cluster.cluster_cidrs[0]",
                 f"{bad}:7:20: services[0].ports[0].port", "4 errors"):
        check(want in r.stderr, f"--check reports {want!r}")
    check(f"{bad}:8:5: services[0].colour: unknown setting (known here: name, " in r.stderr and "warning" not in r.stderr,
          "an unknown key: an error with its position and the known keys")
    # A key svcgate does not know is an error, with the nearest known one (kube-proxy's strict decoding).
    for text, pos, want in (("cluster:\n  masquerade_al: true\n", "2:3", 'cluster.masquerade_al: unknown setting; did you mean "masquerade_all"?'),
                            ("cluster:\n  client_address: preserve\n", "2:3", "cluster.client_address: unknown setting"),
                            ("cluster:\n  client_ip: keep\n", "2:14", 'cluster.client_ip: "keep" is not masquerade or preserve'),
                            ("dataplane:\n  flow_table: {capacityy: 5}\n", "2:16", 'dataplane.flow_table.capacityy: unknown setting; did you mean "capacity"?')):
        with open(bad, "w") as f:
            f.write(text)
        r = run("--config", bad, "--check")
        check(r.returncode == 1 and f"{bad}:{pos}: {want}" in r.stderr and ": 1 error" in r.stderr,
              f"--check refuses an unknown key: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.stdout}")
    # Kubernetes objects through kubernetes.manifests: the error points into the manifest.
    man = os.path.join(d, "objs.yaml")
    with open(man, "w") as f:
        f.write("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIP: 10.96.0.2\n  ports: [{port: 80, nodePort: 99}]\n  type: NodePort\n")
    cfgp = os.path.join(d, "k.yaml")
    with open(cfgp, "w") as f:
        f.write("kubernetes:\n  manifests: [objs.yaml]\n")
    r = run("--config", cfgp, "--check")
    # As kube-proxy, an object's nodePort outside the range is served (the API server checks the
    # range on write; a range changed later does not unserve old Services): a warning, positioned.
    check(r.returncode == 0 and f"warning: Service default/x: {man}:6:11: Service.spec.ports[0].nodePort" in r.stderr
          and "outside nodeport_range 30000-32767; served [nodeport_out_of_range]" in r.stderr,
          f"an object's nodePort outside the range: a warning positioned in the manifest ({r.stderr.strip()})")
    # Two objects claiming one VIP:port: the older keeps it, the newer's entry is left out.
    with open(man, "w") as f:
        for name, ts, ip in (("new", "2026-02-01T00:00:00Z", 3), ("old", "2025-01-01T00:00:00Z", 4)):
            f.write(f"---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, creationTimestamp: '{ts}'}}\n"
                    f"spec:\n  clusterIP: 10.96.0.{ip}\n  externalIPs: [192.0.2.1]\n  ports: [{{port: 80}}]\n")
    r = run("--config", cfgp, "--check")
    check(r.returncode == 0 and "warning: Service default/new:" in r.stderr and "is already used by default/old" in r.stderr
          and "[vip_conflict]" in r.stderr and "default/old:" not in r.stderr,
          f"a shared externalIP:port: the older Service keeps it, the newer's entry is left out ({r.stderr.strip()})")

# --check never starts DPDK: under an address-space limit too small for an EAL (which maps its
# memory segments up front) it still checks, while `svcgatectl trace` of the same config, which
# starts one, cannot.
import resource  # noqa: E402


def limited(*cmd):
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, preexec_fn=cap)


lab = os.path.join(src, "config", "lab.yaml")
r = limited(svcgate, "--config", lab, "--check")
check(r.returncode == 0 and "OK: 8 service ports" in r.stdout, f"--check without DPDK: OK under a 512 MiB address space ({r.stderr.strip()[-200:]})")
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")
r = limited(ctl, "trace", "--config", lab, "tcp 192.168.67.100:1 > 192.168.67.8:30001 [S]")
check(r.returncode != 0, f"... where an EAL cannot start (svcgatectl trace exits {r.returncode})")

# An early failure (the second port has no device) after the EAL, the pool and the first port
# were set up: a clear error, exit 1, everything given back on the way out (no hang, no crash).
with tempfile.TemporaryDirectory() as d:
    cfgp = os.path.join(d, "early.yaml")
    with open(cfgp, "w") as f:
        f.write("dataplane:\n  eal: [--no-huge, --no-shconf, -m, '128', --no-pci, --no-telemetry]\n"
                "  ports:\n    - {name: a, device: net_null0, addresses: [10.9.0.1/24]}\n"
                "    - {name: b, device: '0000:99:00.0', addresses: [10.9.1.1/24]}\n"
                f"control: {{socket: {d}/s.sock, metrics: ''}}\n")
    r = run("--config", cfgp)
    check(r.returncode == 1 and 'port b: no DPDK device "0000:99:00.0"' in r.stderr and "stopping" in r.stderr,
          f"a port that fails after others were set up: clear error, exit 1 ({r.returncode}: {r.stderr.strip()[-160:]})")
    # Log levels: the error is written as one, the port that came up is information.
    lines = r.stderr.splitlines()
    check(any(l.startswith("svcgate: error: port b:") for l in lines) and any(l.startswith("svcgate: port a:") for l in lines),
          "log lines carry their level (svcgate: error: ...; information plain)")
    r = run("--config", cfgp, "--log-level", "err")
    check(r.returncode == 1 and "svcgate: error: port b:" in r.stderr and "port a:" not in r.stderr,
          f"--log-level err: only errors ({r.stderr.strip()[-200:]})")
    r = subprocess.run([svcgate, "--config", cfgp], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, JOURNAL_STREAM="8:12345"))
    lines = r.stderr.splitlines()
    check(any(l.startswith("<3>port b:") for l in lines) and any(l.startswith("<6>port a:") for l in lines),
          f"under journald each line starts with its syslog priority ({[l[:20] for l in lines if l.startswith('<')][:4]})")
    r = run("--config", cfgp, "--log-level", "loud")
    check(r.returncode == 2 and "is not err, warning" in r.stderr, "a bad --log-level: usage error, exit 2")

# Issue 18: host interface, routing and health-port errors at --check.
HA_BASE = """dataplane:
  ports:
    - {name: ext, device: net_null0, addresses: [192.0.2.8/24], host_interface: %s}
control: {metrics: '127.0.0.1:9477'}
%s
services:
  - name: a/lb
    type: LoadBalancer
    cluster_ip: 10.96.0.1
    load_balancer_ips: [198.51.100.1]
    external_traffic_policy: %s
    health_check_node_port: %s
    ports: [{port: 80, node_port: 30080}]
  - name: a/other
    type: NodePort
    cluster_ip: 10.96.0.2
    ports: [{port: 80, node_port: 30081}]
"""
with tempfile.TemporaryDirectory() as d:
    def ha_check(host="sg-ext", routing="routing: {table: 101}", policy="Local", hcnp="32100"):
        p = os.path.join(d, "ha.yaml")
        with open(p, "w") as f:
            f.write(HA_BASE % (host, routing, policy, hcnp))
        return run("--config", p, "--check")
    r = ha_check()
    check(r.returncode == 0 and "OK" in r.stdout, f"a host interface, routing and a health check port: OK ({r.stderr.strip()})")
    r = ha_check(host="lo")
    check(r.returncode == 1 and "host_interface lo: cannot be created: an interface of that name exists and is not a TAP"
          in r.stderr, f"a host interface whose name is taken: clear error ({r.stderr.strip()})")
    r = ha_check(host="'a/b'")
    check(r.returncode == 1 and "is not an interface name" in r.stderr, f"a bad interface name ({r.stderr.strip()})")
    r = ha_check(host="'sg,remote=x'")
    check(r.returncode == 1 and "is not an interface name" in r.stderr,
          f"an interface name that would add net_tap arguments refused ({r.stderr.strip()})")
    r = ha_check(host="sg-ext, mac: '00:00:00:00:00:00'")
    check(r.returncode == 1 and "is not a unicast MAC address" in r.stderr, f"an all-zero mac refused ({r.stderr.strip()})")
    r = ha_check(host="this-name-is-too-long")
    check(r.returncode == 1 and "is not an interface name" in r.stderr, "an interface name past 15 characters")
    r = ha_check(routing="routing: {table: 101, anounce: [node_ips]}")
    check(r.returncode == 1 and "routing.anounce: unknown setting" in r.stderr, f"an unknown routing setting: an error ({r.stderr.strip()})")
    r = ha_check(routing="routing: {table: 254}")
    check(r.returncode == 1 and "table 254 is the kernel's" in r.stderr, "the kernel's main table refused")
    r = ha_check(routing="routing: {table: 101, announce: [pod_ips]}")
    check(r.returncode == 1 and '"pod_ips" is not load_balancer_ips' in r.stderr, "an unknown announce kind refused")
    r = ha_check(routing="routing: {announce: [node_ips]}")
    check(r.returncode == 1 and "routing needs table" in r.stderr, "routing without a table refused")
    r = ha_check(hcnp="30081")
    check(r.returncode == 1 and "clashes with the TCP NodePort of Service a/other" in r.stderr,
          f"a healthCheckNodePort on another Service's NodePort ({r.stderr.strip()})")
    r = ha_check(hcnp="9477")
    check(r.returncode == 1 and "clashes with control.metrics" in r.stderr, "a healthCheckNodePort on the metrics port")
    r = ha_check(policy="Cluster", hcnp="30081")
    check(r.returncode == 0, f"a healthCheckNodePort under policy Cluster is ignored, as kube-proxy does ({r.stderr.strip()})")

# Issue 19: the flow state file.
STATE_BASE = """dataplane:
  ports:
    - {name: ext, device: net_null0, addresses: [192.0.2.8/24]}
  flow_table: {%s}
services: []
"""
with tempfile.TemporaryDirectory() as d:
    def state_check(flow_table):
        p = os.path.join(d, "state.yaml")
        with open(p, "w") as f:
            f.write(STATE_BASE % flow_table)
        return run("--config", p, "--check")
    r = state_check("state_file: flows.state, state_max_age: 60")
    check(r.returncode == 0, f"a state file beside the config: OK ({r.stderr.strip()})")
    r = state_check("state_file: /nonexistent-dir/flows.state")
    check(r.returncode == 1 and "directory /nonexistent-dir does not exist" in r.stderr,
          f"a state file in a missing directory: clear error ({r.stderr.strip()})")
    r = state_check("state_file: ''")
    check(r.returncode == 1 and "state_file: a file name" in r.stderr, f"an empty state file name refused ({r.stderr.strip()})")
    r = state_check("state_file: flows.state}\ncluster: {masquerade_ports: 20000-20100")
    check(r.returncode == 1 and "of at least 256 ports" in r.stderr, f"a masquerade range under 256 ports refused ({r.stderr.strip()})")
    r = state_check("state_file: flows.state}\ncluster: {maglev_table_size: 1000, maglev_seed: 3")
    check(r.returncode == 1 and "1000 is not a prime (next: 1009)" in r.stderr, f"a Maglev size that is not prime refused ({r.stderr.strip()})")
    r = state_check("state_file: flows.state}\ncluster: {maglev_table_size: 65521, maglev_seed: 3, masquerade_ports: 22528-44031")
    check(r.returncode == 0, f"a gateway's masquerade range, Maglev seed and size: OK ({r.stderr.strip()})")
    r = state_check("state_file: flows.state, state_max_age: 0")
    check(r.returncode == 1 and "state_max_age" in r.stderr, f"state_max_age 0 refused ({r.stderr.strip()})")

# Issue 19: flow replication between gateways (ha:).
SYNC_BASE = """dataplane:
  ports:
    - {name: ext, device: net_null0, addresses: [192.0.2.8/24]}
    - {name: cluster, device: net_null1, addresses: [10.192.0.12/24]}
ha:
%s
services: []
"""
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "ha.key"), "w") as f:
        f.write("ab" * 32 + "\n")
    with open(os.path.join(d, "short.key"), "w") as f:
        f.write("ab" * 16)

    def sync_check(ha):
        p = os.path.join(d, "sync.yaml")
        with open(p, "w") as f:
            f.write(SYNC_BASE % ha)
        return run("--config", p, "--check")
    good = "  listen: 10.193.0.12:7400\n  peers: [10.193.0.11, '10.193.0.13:7401']\n  key_file: ha.key\n"
    r = sync_check(good + "  takeover_ports: [cluster]\n  refresh_seconds: 5")
    check(r.returncode == 0, f"ha: listen, peers, a key file beside the config, takeover ports: OK ({r.stderr.strip()})")
    r = sync_check(good.replace("ha.key", "missing.key"))
    check(r.returncode == 1 and "ha.key_file" in r.stderr and "cannot read" in r.stderr,
          f"a missing key file: clear error ({r.stderr.strip()})")
    r = sync_check(good.replace("ha.key", "short.key"))
    check(r.returncode == 1 and "must be 64 hex digits" in r.stderr and "openssl rand -hex 32" in r.stderr,
          f"a short key: clear error, and how to make one ({r.stderr.strip()})")
    r = sync_check(good.replace("10.193.0.12:7400", "10.193.0.12"))
    check(r.returncode == 1 and "is not ADDRESS:PORT" in r.stderr, f"listen without a port refused ({r.stderr.strip()})")
    r = sync_check(good.replace("10.193.0.11", "10.193.0.12"))
    check(r.returncode == 1 and "is this gateway's own ha.listen" in r.stderr, "a peer that is this gateway refused")
    r = sync_check(good.replace("10.193.0.11", "'fd00::1'"))
    check(r.returncode == 1 and "address family" in r.stderr, "a peer of the other family refused")
    r = sync_check(good + "  takeover_ports: [clutser]")
    check(r.returncode == 1 and 'no port is named "clutser"' in r.stderr, f"an unknown takeover port refused ({r.stderr.strip()})")
    r = sync_check(good + "  hello_ms: 500\n  dead_after_ms: 1000")
    check(r.returncode == 1 and "less than three hellos" in r.stderr, "dead_after_ms under three hellos refused")
    r = sync_check(good + "  peer: [10.193.0.14]")
    check(r.returncode == 1 and "ha.peer: unknown setting" in r.stderr, f"an unknown ha setting refused ({r.stderr.strip()})")
    r = sync_check("  listen: 10.193.0.12:7400")
    check(r.returncode == 1 and "ha needs listen" in r.stderr, "ha without peers or key refused")

r = run("--config", "/nonexistent.yaml", "--check")
check(r.returncode == 1 and "cannot open file" in r.stderr, "missing file: clear error")
r = run("--bogus")
check(r.returncode == 2 and "unrecognised option" in r.stderr, "unknown option: usage error, exit 2")
r = run()
check(r.returncode == 2 and "--config is required" in r.stderr, "no --config: usage error, exit 2")
r = run("--config", os.path.join(src, "tests", "conformance", "kube-proxy", "nft-load-balancer", "flows.yaml"), "--check")
check(r.returncode == 1 and "expected a mapping" in r.stderr, "a YAML file that is not a config: error, no crash")
checks.finish()
