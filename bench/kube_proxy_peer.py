#!/usr/bin/python3
"""The peer every cluster already has: kube-proxy's own dataplane, the Linux kernel forwarding the
bench's flows through kube-proxy's rule set, on one core.

Three network namespaces (created here, removed at the end; nothing leaves them):
  sgb-ks  the sender: dpdk-testpmd replays the capture (net_pcap, infinite_rx) into a veth
          (net_af_packet) as fast as it can, on CPU 1;
  sgb-kk  the kernel under test: routes between its two veths with the rules loaded (nftables:
          kube-proxy's nftables proxier layout; iptables: its iptables layout, bench/gen.py) and
          conntrack; receive packet steering puts its whole receive and forwarding path on CPU 0;
  sgb-kz  the sink: the forwarded frames arrive and are dropped (a MAC nobody has).
The rate is what leaves the kernel's outer veth (tx_packets), sampled like rate.py samples a DPDK
port. `none` loads no rule (plain forwarding, no conntrack): the ceiling of this setup, and a
check that the sender is not what limits the others.

usage: kube_proxy_peer.py --rules nft|iptables|none [--rules-file F] --pcap F [--warmup S] [--seconds S]
prints one JSON object: {"mpps": ..., "packets": ..., "seconds": ..., "rules": ..., "sent_mpps": ...}
"""
import argparse
import json
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--rules", choices=["nft", "iptables", "none"], required=True)
ap.add_argument("--rules-file")
ap.add_argument("--pcap", required=True)
ap.add_argument("--warmup", type=float, default=3)
ap.add_argument("--seconds", type=float, default=6)
args = ap.parse_args()

S, K, Z = "sgb-ks", "sgb-kk", "sgb-kz"
DST_MAC = "02:00:00:00:00:02"   # the capture's destination MAC (bench/gen.py): the kernel's veth
SINK_MAC = "02:00:00:00:00:99"  # the next hop's: no interface has it, the sink drops at once


def sh(*cmd, ns=None, check=True, **kw):
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, capture_output=True, text=True, timeout=120, **kw)
    if check and r.returncode != 0:
        sys.exit(f"kube_proxy_peer: {' '.join(full)}: {r.stderr.strip()}")
    return r


def cleanup():
    subprocess.run(["pkill", "-f", "file-prefix=sgb-kp"], capture_output=True)
    for ns in (S, K, Z):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def setup():
    cleanup()
    for ns in (S, K, Z):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
    sh("ip", "link", "add", "vA", "netns", S, "type", "veth", "peer", "name", "kA", "netns", K)
    sh("ip", "link", "add", "kB", "netns", K, "type", "veth", "peer", "name", "vB", "netns", Z)
    sh("ip", "link", "set", "vA", "up", ns=S)
    sh("ip", "link", "set", "vB", "up", ns=Z)
    sh("ip", "link", "set", "kA", "address", DST_MAC, ns=K)
    for dev in ("kA", "kB"):
        sh("ip", "link", "set", dev, "up", ns=K)
    sh("ip", "addr", "add", "10.253.0.1/24", "dev", "kA", ns=K)
    sh("ip", "addr", "add", "10.254.0.1/24", "dev", "kB", ns=K)
    for key, val in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "0"),
                     ("net.ipv4.conf.default.rp_filter", "0"), ("net.ipv4.conf.kA.rp_filter", "0")):
        sh("sysctl", "-qw", f"{key}={val}", ns=K)
    sh("ip", "neigh", "add", "10.254.0.2", "lladdr", SINK_MAC, "dev", "kB", "nud", "permanent", ns=K)
    for prefix in ("10.96.0.0/12", "10.128.0.0/10"):  # the ClusterIPs (none loaded), the pods
        sh("ip", "route", "add", prefix, "via", "10.254.0.2", "dev", "kB", ns=K)
    # The kernel's receive path on CPU 0 (the sender's thread is on CPU 1).
    sh("sh", "-c", "echo 1 > /sys/class/net/kA/queues/rx-0/rps_cpus", ns=K)
    if args.rules == "nft":
        sh("nft", "-f", args.rules_file, ns=K)
    elif args.rules == "iptables":
        with open(args.rules_file) as f:
            sh("iptables-restore", ns=K, input=f.read())
        sh("iptables", "-t", "nat", "-A", "PREROUTING", "-j", "KUBE-SERVICES", ns=K)
        sh("iptables", "-t", "nat", "-A", "POSTROUTING", "-j", "KUBE-POSTROUTING", ns=K)


def counter(ns, dev, name):
    return int(sh("cat", f"/sys/class/net/{dev}/statistics/{name}", ns=ns).stdout)


def main():
    setup()
    sender = subprocess.Popen(
        ["timeout", "300", "ip", "netns", "exec", S, "dpdk-testpmd", "--lcores=0@1,1@1", "--no-pci", "--no-huge",
         "-m", "1024", "--file-prefix=sgb-kp", "--vdev", f"net_pcap0,rx_pcap={args.pcap},infinite_rx=1",
         "--vdev", "net_af_packet1,iface=vA,qdisc_bypass=1", "--", "--forward-mode=io", "--nb-cores=1",
         "--stats-period=3600", "--total-num-mbufs=16384"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while counter(K, "kB", "tx_packets") == 0:  # forwarding has begun
            if time.monotonic() > deadline or sender.poll() is not None:
                sys.exit("kube_proxy_peer: nothing forwarded within 60 s")
            time.sleep(0.2)
        time.sleep(args.warmup)
        p0, s0, t0 = counter(K, "kB", "tx_packets"), counter(S, "vA", "tx_packets"), time.monotonic()
        time.sleep(args.seconds)
        p1, s1, t1 = counter(K, "kB", "tx_packets"), counter(S, "vA", "tx_packets"), time.monotonic()
    finally:
        sender.send_signal(2)
        try:
            sender.wait(timeout=20)
        except subprocess.TimeoutExpired:
            sender.kill()
        cleanup()
    secs = t1 - t0
    print(json.dumps({"mpps": (p1 - p0) / secs / 1e6, "packets": p1 - p0, "seconds": secs, "rules": args.rules,
                      "sent_mpps": (s1 - s0) / secs / 1e6}))


main()
