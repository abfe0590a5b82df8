#!/usr/bin/python3
"""bench/results/*.json → bench/results/summary.json, bench/RESULTS.md and its plots (PNG)."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def machine_cpu():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def machine():
    cpu = machine_cpu()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    osr = "?"
    try:
        osr = [l.split("=", 1)[1].strip().strip('"') for l in open("/etc/os-release") if l.startswith("PRETTY_NAME")][0]
    except (OSError, IndexError):
        pass
    return f"{osr}, {os.cpu_count()} × {cpu}, {mem:.0f} GiB, kernel {platform.release()}"


def med(v):
    return statistics.median(v) if v else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", default="bench/results")
    p.add_argument("--out", default="bench/RESULTS.md")
    p.add_argument("--quick", type=int, default=0)
    a = p.parse_args()
    r = a.results
    macro = load(f"{r}/macro.json", [])
    reload_ = load(f"{r}/reload.json", {}).get("benchmarks", [])
    nf = load(f"{r}/netfilter.json", [])
    micro = load(f"{r}/micro.json", {}).get("benchmarks", [])

    # A run's family is 4 unless its params say 6, its path DNAT only unless they say masq; the
    # scaling section's runs (section "scaling") are asked for by name.
    def runs(name, family=4, path="dnat", section=None, replies=None, **params):
        return [m["result"]["mpps"] for m in macro
                if m["name"] == name and m["params"].get("family", 4) == family
                and m["params"].get("path", "dnat") == path and m["params"].get("section") == section
                and m["params"].get("replies") == replies
                and all(m["params"].get(k) == v for k, v in params.items())]

    # Ratios pair each svcgate run with the reference run of the same repetition.
    def paired(flows, ref="testpmd"):
        tp = runs(ref, flows=flows, cores=1)
        sg = runs("svcgate", flows=flows, services=100, workers=1)
        return [s / t for s, t in zip(sg, tp) if t], tp, sg

    r4k, tp4k, sg4k = paired(4096)
    r1m, tp1m, sg1m = paired(1000000)
    r4k_sw, sw4k, _ = paired(4096, "testpmd_5tswap")
    r1m_sw, sw1m, _ = paired(1000000, "testpmd_5tswap")
    # The host's noise: testpmd 5tswap run again later in the same repetition, ÷ its first run. A
    # ratio of svcgate's whose interval lies inside this one's spread around 1 is not above noise.
    noise = [b / a for a, b in zip(sw4k, runs("testpmd_5tswap_again", flows=4096, cores=1)) if a]
    # The masqueraded path (NodePorts, SNAT + DNAT) ÷ DNAT only, paired within each repetition.
    masq4k = runs("svcgate", path="masq", flows=4096, services=100, workers=1)
    r_masq = [m / d for d, m in zip(sg4k, masq4k) if d]
    # The same NodePort packets with client_ip preserve (DNAT only) ÷ masqueraded, paired likewise.
    pres4k = runs("svcgate", path="preserve", flows=4096, services=100, workers=1)
    r_pres = [p / m for m, p in zip(masq4k, pres4k) if m]
    # The port on a VLAN (every frame tagged), ÷ DNAT only, paired likewise: the same flows, the
    # same 64-byte frames (68 tagged).
    vlan4k = runs("svcgate", path="vlan", flows=4096, services=100, workers=1)
    r_vlan = [v / d for d, v in zip(sg4k, vlan4k) if d]
    # The tagged capture's cost to testpmd 5tswap itself: tagged ÷ untagged, paired likewise.
    sw4kv = runs("testpmd_5tswap", path="vlan", flows=4096, cores=1)
    r_vlan_sw = [v / u for u, v in zip(sw4k, sw4kv) if u]
    # Issue 67's jumbo figure: the 1500 port with a 9000-MTU port configured beside it ÷ without
    # (the jumbo pool exists; what the 1500 path pays for it). The port itself at 9000, its frames
    # in the jumbo pool's 9 KB mbufs: reported beside.
    jumbo4k = runs("svcgate", path="jumbo_pool", flows=4096, services=100, workers=1)
    r_jumbo = [j / d for d, j in zip(sg4k, jumbo4k) if d]
    jport4k = runs("svcgate", path="jumbo_port", flows=4096, services=100, workers=1)
    r_jport = [j / d for d, j in zip(sg4k, jport4k) if d]
    # The same port sampling one receive burst in 64 for its latency histogram ÷ not sampling.
    lat4k = runs("svcgate", path="latency_sampling", flows=4096, services=100, workers=1)
    r_lat = [x / d for d, x in zip(sg4k, lat4k) if d]
    one, two = runs("svcgate", flows=4096, services=100, workers=1), runs("svcgate", flows=4096, services=100, workers=2)
    ovs = runs("ovs", flows=4096)
    kernel = {r: runs("kernel", flows=4096, rules=r) for r in ("none", "nft", "iptables")}
    # IPv6 ÷ IPv4: each IPv6 run paired with the IPv4 run just before it (same repetition, same
    # capture shape, port and core).
    sg4k6 = runs("svcgate", family=6, flows=4096, services=100, workers=1)
    r6 = [b / a for a, b in zip(sg4k, sg4k6) if a]
    svc = {s: med(runs("svcgate", flows=100000, services=s, workers=1)) for s in (10, 1000, 10000, 100000)}
    svc = {k: v for k, v in svc.items() if v}
    # The full run repeats each micro-benchmark (interleaved with the others) and reports the
    # median; --quick runs each once. One entry per benchmark: its median, else its only run.
    def micro_runs(name):  # its entries: each repetition and, when repeated, the aggregates
        return [b for b in micro if b.get("run_name", b.get("name")) == name]

    def micro_entry(name):
        runs_ = micro_runs(name)
        medians = [b for b in runs_ if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
        if medians:
            return medians[0]
        plain = [b for b in runs_ if b.get("run_type") != "aggregate"]
        return plain[0] if plain else None

    micro_reps = max([b.get("repetitions", 1) for b in micro] or [1])

    def micro_rate(name):  # M items/s; None when the run is missing or any repetition reported an error
        b = micro_entry(name)
        if b is None or any(x.get("error_occurred") for x in micro_runs(name)):
            return None
        return b.get("items_per_second", 0) / 1e6

    def micro_counter(name, key):
        b = micro_entry(name)
        return None if b is None else b.get(key)

    # A ratio of two micro-benchmarks with its interval (bench/stats.py): repetition i of each
    # (interleaved at random with every other benchmark's) makes round i.
    def micro_ratio(off, on):
        reps = [[b["items_per_second"] for b in micro_runs(n) if b.get("run_type") != "aggregate" and
                 not b.get("error_occurred")] for n in (off, on)]
        return stats.interval([b / a for a, b in zip(*reps) if a])

    # Active health checks at 10,000 endpoints every 2 s beside the fast path (off, on) and the
    # prober's share of a core.
    chk_est = (micro_rate("BM_EstablishedChecks/10/0"), micro_rate("BM_EstablishedChecks/10/1"))
    chk_new = (micro_rate("BM_NewFlowsChecks/10/90/0/manual_time"), micro_rate("BM_NewFlowsChecks/10/90/1/manual_time"))
    chk_cpu = micro_counter("BM_EstablishedChecks/10/1", "prober_cpu_pct")
    # NAT events exported (IPFIX) beside new flows (off, on), the exporter's CPU time per event.
    ipfix_new = (micro_rate("BM_NewFlowsIpfix/10/90/0/manual_time"), micro_rate("BM_NewFlowsIpfix/10/90/1/manual_time"))
    ipfix_ns = micro_counter("BM_NewFlowsIpfix/10/90/1/manual_time", "exporter_ns_per_event")
    # The established path with export on (each packet counts its flow's packets and octets) and off.
    ipfix_est = (micro_rate("BM_EstablishedIpfix/10/0"), micro_rate("BM_EstablishedIpfix/10/1"))
    # Their ratios over the repetitions; a figure is its interval's median (the median of the
    # rounds' ratios, as section 1's are), not the ratio of the two medians.
    micro_ivs = {
        "established_checks_ratio": micro_ratio("BM_EstablishedChecks/10/0", "BM_EstablishedChecks/10/1"),
        "new_flows_checks_ratio": micro_ratio("BM_NewFlowsChecks/10/90/0/manual_time",
                                              "BM_NewFlowsChecks/10/90/1/manual_time"),
        "new_flows_ipfix_ratio": micro_ratio("BM_NewFlowsIpfix/10/90/0/manual_time",
                                             "BM_NewFlowsIpfix/10/90/1/manual_time"),
        "established_ipfix_ratio": micro_ratio("BM_EstablishedIpfix/10/0", "BM_EstablishedIpfix/10/1"),
    }
    # The tables counting, no exporter: what export's per-flow counters cost new flows on their own.
    ipfix_counting = micro_ratio("BM_NewFlowsIpfix/10/90/0/manual_time", "BM_NewFlowsIpfix/10/90/2/manual_time")

    def micro_figure(key, pair):
        iv = micro_ivs[key]
        return iv["median"] if iv else (ratio(pair[1], pair[0]) if all(pair) else None)
    new90 = micro_rate("BM_PipelineNewFlows/10/90/manual_time")
    new10 = micro_rate("BM_PipelineNewFlows/10/10/manual_time")
    new90_v6 = micro_rate("BM_PipelineNewFlows6/10/90/manual_time")
    est_micro, est_micro_v6 = micro_rate("BM_PipelineEstablished/10"), micro_rate("BM_PipelineEstablished6/10")
    new_svc = {s: micro_rate(f"BM_PipelineNewFlows/{s}/90/manual_time") for s in (10, 1000, 10000, 100000)}
    new_svc = {k: v for k, v in new_svc.items() if v}
    # Flatness: the slowest ÷ the fastest service count, established (medians of interleaved
    # rounds) and new flows; the headline is the worse of the two.
    flat_est = min(svc.values()) / max(svc.values()) if svc else None
    flat_new = min(new_svc.values()) / max(new_svc.values()) if new_svc else None
    flat = min(x for x in (flat_est, flat_new) if x is not None) if (flat_est or flat_new) else None
    reload_ms = {}
    for b in reload_:
        if b.get("aggregate_name") == "median" and b["run_name"].startswith("BM_ReloadCompact/"):
            reload_ms[int(b["run_name"].split("/")[1])] = b["real_time"]
    ipt = {e["services"]: e["ms"] for e in nf if e["tool"] == "iptables" and e["ok"]}
    nft = {e["services"]: e["ms"] for e in nf if e["tool"] == "nft" and e["ok"]}
    bpf = micro_counter("BM_BytesPerFlow/10000000/iterations:1", "bytes_per_flow")
    bpf6 = micro_counter("BM_BytesPerFlow6/10000000/iterations:1", "bytes_per_flow")
    rss_1m = [m["result"].get("rss_kb") for m in macro if m["name"] == "svcgate" and m["params"].get("flows") == 1000000]
    # Replication (bench/run section 9): rounds of BM_PipelineProvenFlows off (0) and on (1), each
    # round's ratio, then the median.
    sync_ratios, sync_bpf, sync_on, sync_off = [], [], [], []
    for k in range(1, 20):
        rows = load(f"{r}/sync-{k}.json", {}).get("benchmarks", [])
        off = next((b for b in rows if b.get("name", "").startswith("BM_PipelineProvenFlows/0/")), None)
        on = next((b for b in rows if b.get("name", "").startswith("BM_PipelineProvenFlows/1/")), None)
        if off and on and off.get("items_per_second") and on.get("items_per_second") and not on.get("error_occurred"):
            sync_off.append(off["items_per_second"] / 1e6)
            sync_on.append(on["items_per_second"] / 1e6)
            sync_ratios.append(on["items_per_second"] / off["items_per_second"])
            sync_bpf.append(on.get("sync_bytes_per_flow"))

    # The floor under the established path (BM_EstablishedFloor, layers 0-4, in process) against
    # what the port leaves for svcgate's own work at the target: the target's time per packet
    # through the port (target × 5tswap) less the port's own (testpmd io), both from this run.
    def floor(flows, target, sw, tp):
        ns = [1000 / x if x else None for x in (micro_rate(f"BM_EstablishedFloor/{k}/{flows}") for k in range(5))]
        if None in ns:
            return None
        own = [x - ns[0] for x in ns[1:]]  # the harness's own frame copy taken off
        budget = 1000 / (target * med(sw)) - 1000 / med(tp) if sw and tp else None
        return {"parse_ns": own[0], "lookup_ns": own[1], "nat_ns": own[2], "pipeline_ns": own[3], "budget_ns": budget}
    floor4k, floor1m = floor(4096, 0.4, sw4k, tp4k), floor(1 << 20, 0.45, sw1m, tp1m)

    # Scaling over worker cores (bench/run section 11): W = 1, 2, 4, ... as the host allowed.
    scale_ws = sorted({m["params"]["workers"] for m in macro if m["params"].get("section") == "scaling"
                       and m["name"] == "svcgate"})
    scale = {w: {"svcgate": med(runs("svcgate", section="scaling", flows=4096, workers=w)),
                 "testpmd_5tswap": med(runs("testpmd_5tswap", section="scaling", flows=4096, cores=w)),
                 **{f"{p}_{pl}": med(runs("svcgate", section="scaling", path=p, replies=pl, flows=4096, workers=w))
                    for p in ("dnat", "masq") for pl in ("same", "cross")}} for w in scale_ws}
    wmax = max(scale_ws) if scale_ws else None

    def ratio(x, y):
        return x / y if x and y else None

    def by_workers(name):  # a benchmark run at W = 1, 2, 4, ...: {W: M items/s} for the Ws that ran
        rates = {w: micro_rate(f"{name}/{w}/manual_time") for w in (1, 2, 4, 8, 16, 32, 64, 128)}
        return {w: v for w, v in rates.items() if v}

    new_by_w = by_workers("BM_PipelineNewFlowsWorkers")
    new_two_owners = micro_rate("BM_PipelineNewFlowsTwoOwners/manual_time")
    # The host's own: W threads reading random lines of memory, 32 in flight each (M lines/s).
    mem_by_w = by_workers("BM_MemoryLineWorkers")
    mem_wmax = max(mem_by_w) if mem_by_w else None
    scaling = {
        "cores": os.cpu_count(),
        "cpu": machine_cpu(),
        "workers": scale_ws,
        "established_mpps_by_workers": {w: v["svcgate"] for w, v in scale.items()},
        "testpmd_5tswap_mpps_by_cores": {w: v["testpmd_5tswap"] for w, v in scale.items()},
        "both_directions_mpps_by_workers": {w: {f"{p}_{pl}": v[f"{p}_{pl}"] for p in ("dnat", "masq")
                                                for pl in ("same", "cross")} for w, v in scale.items()},
    }
    # Section 12 (bench/latency): per path, the rate as fast as the link takes it and, at each
    # offered load, pace's round trip and svcgate's own histogram (µs).
    lat_raw = load(f"{r}/latency.json", {})

    def latency_path(x):
        if not x or not x.get("max"):
            return None
        def row(load_, e):
            if not e or not e.get("rtt_us"):  # the run failed, or nothing came back
                return {"load": load_, "measured": False}
            inside = e.get("inside_us")
            inside = inside if inside and inside.get("samples") else None
            return {"load": load_, "offered_mpps": e["offered_mpps"], "mpps": e["mpps"], "lost": e["lost"],
                    "late": e["late"], "rtt": {k: e["rtt_us"][k] for k in ("p50", "p90", "p99", "p999", "max")},
                    "inside": {k: inside[f"{k}_us"] for k in ("p50", "p99", "p999", "max")} if inside else None}
        return {"max_mpps": x["max"]["mpps"], "at": [row(l, e) for l, e in zip(lat_raw["loads"], x.get("at", []))]}
    latency_us = ({k: latency_path(lat_raw.get(k)) for k in ("dnat", "dnat_busy", "masq", "new", "testpmd_5tswap")}
                  if lat_raw else None)
    kube = load(f"{r}/kube.json", {})
    lb_fast, lb_default = load(f"{r}/lb-unthrottled.json", {}), load(f"{r}/lb-default.json", {})
    summary = {
        "established_ratio_vs_testpmd": med(r4k),
        "established_ratio_vs_testpmd_1m": med(r1m),
        "established_ratio_vs_5tswap": med(r4k_sw),
        "host_noise_5tswap": med(noise),
        "established_ratio_vs_5tswap_1m": med(r1m_sw),
        "established_masq_ratio_vs_dnat": med(r_masq),
        "established_preserve_ratio_vs_masq": med(r_pres),
        "established_vlan_ratio": med(r_vlan),
        "established_jumbo_pool_ratio": med(r_jumbo),
        "established_jumbo_port_ratio": med(r_jport),
        "vlan_ratio_testpmd_5tswap": med(r_vlan_sw),
        "latency_sampling_ratio": med(r_lat),
        "latency_us": latency_us,
        "ratio_vs_ovs": (med(sg4k) / med(ovs)) if ovs and sg4k else None,
        "ratio_vs_kube_proxy_nft": (med(sg4k) / med(kernel["nft"])) if kernel["nft"] and sg4k else None,
        "ratio_vs_kube_proxy_iptables": (med(sg4k) / med(kernel["iptables"])) if kernel["iptables"] and sg4k else None,
        "new_flows_mpps": new90,
        "established_v6_ratio_vs_v4": med(r6),
        "new_flows_v6_mpps": new90_v6,
        "services_flatness": flat,
        "services_flatness_established": flat_est,
        "services_flatness_new_flows": flat_new,
        "reload_10k_ms": reload_ms.get(10000),
        "kube_first_sync_10k_ms": kube.get("first_sync_ms"),
        "kube_programming_p50_ms": kube.get("programming_p50_ms"),
        "kube_programming_p99_ms": kube.get("programming_p99_ms"),
        "kube_publishes_per_second": kube.get("publishes_per_second"),
        "lb_first_allocation_services": lb_fast.get("lb_services"),
        "lb_first_allocation_unthrottled_s": lb_fast.get("last_status_after_first_create_s"),
        "lb_first_allocation_default_rate_s": lb_default.get("last_status_after_first_create_s"),
        "lb_reader_cpu_s": lb_fast.get("reader_cpu_s"),
        "reload_speedup_vs_iptables": (ipt[10000] / reload_ms[10000]) if 10000 in ipt and 10000 in reload_ms else None,
        "bytes_per_flow": bpf,
        "bytes_per_flow_v6": bpf6,
        "new_flows_sync_ratio": med(sync_ratios),
        "established_checks_ratio": micro_figure("established_checks_ratio", chk_est),
        "new_flows_checks_ratio": micro_figure("new_flows_checks_ratio", chk_new),
        "health_checks_prober_cpu_pct_10k": chk_cpu,
        "new_flows_ipfix_ratio": micro_figure("new_flows_ipfix_ratio", ipfix_new),
        "new_flows_ipfix_counting_ratio": ipfix_counting["median"] if ipfix_counting else None,
        "established_ipfix_ratio": micro_figure("established_ipfix_ratio", ipfix_est),
        # Every ratio target as {median, low, high, rounds, coverage} (bench/stats.py): each
        # repetition's own ratio (its runs paired within the repetition, or interleaved rounds).
        "intervals": {
            "established_ratio_vs_testpmd": stats.interval(r4k),
            "established_ratio_vs_testpmd_1m": stats.interval(r1m),
            "established_ratio_vs_5tswap": stats.interval(r4k_sw),
            "host_noise_5tswap": stats.interval(noise),
            "established_ratio_vs_5tswap_1m": stats.interval(r1m_sw),
            "established_masq_ratio_vs_dnat": stats.interval(r_masq),
            "established_preserve_ratio_vs_masq": stats.interval(r_pres),
            "established_vlan_ratio": stats.interval(r_vlan),
            "established_jumbo_pool_ratio": stats.interval(r_jumbo),
            "established_jumbo_port_ratio": stats.interval(r_jport),
            "vlan_ratio_testpmd_5tswap": stats.interval(r_vlan_sw),
            "latency_sampling_ratio": stats.interval(r_lat),
            "established_v6_ratio_vs_v4": stats.interval(r6),
            "new_flows_sync_ratio": stats.interval(sync_ratios),
            **micro_ivs,
            "new_flows_ipfix_counting_ratio": ipfix_counting,
        },
        "ipfix_exporter_ns_per_event": ipfix_ns,
        "sync_bytes_per_flow": med([x for x in sync_bpf if x]),
        "new_flows_sync_mpps": {"off": med(sync_off), "on": med(sync_on), "rounds": len(sync_ratios)},
        "two_worker_scaling": (med(two) / med(one)) if one and two else None,
        # Rate at the largest W ÷ (W × rate at 1), established flows; svcgate's and testpmd 5tswap's.
        "scaling_efficiency": ratio(scale[wmax]["svcgate"], wmax * (scale[1]["svcgate"] or 0)) if wmax and 1 in scale else None,
        "scaling_efficiency_testpmd_5tswap": (ratio(scale[wmax]["testpmd_5tswap"], wmax * (scale[1]["testpmd_5tswap"] or 0))
                                              if wmax and 1 in scale else None),
        # Replies on another queue than their requests ÷ on the same queue, at the largest W.
        "cross_queue_ratio": ratio(scale[wmax]["dnat_cross"], scale[wmax]["dnat_same"]) if wmax else None,
        "cross_queue_ratio_masq": ratio(scale[wmax]["masq_cross"], scale[wmax]["masq_same"]) if wmax else None,
        "new_flows_mpps_by_workers": new_by_w,
        # One worker on a table two own ÷ on a table of its own: the multi-writer insert's cost alone
        # (locks and CAS, no second writer).
        "new_flows_two_owners_ratio": ratio(new_two_owners, new_by_w.get(1)),
        # The host's random-read rate, W threads reading random lines 32 at a time (M lines/s), and
        # its rate at the largest W ÷ (W × at 1): what many workers' misses share.
        "memory_scaling_efficiency": ratio(mem_by_w[mem_wmax], mem_wmax * mem_by_w.get(1, 0)) if mem_wmax else None,
        "memory_mlines_by_workers": mem_by_w,
        "scaling": scaling,
        "established_mpps": {"svcgate_4k": med(sg4k), "testpmd_4k": med(tp4k), "svcgate_1m": med(sg1m),
                             "testpmd_1m": med(tp1m), "testpmd_5tswap_4k": med(sw4k), "testpmd_5tswap_1m": med(sw1m),
                             "svcgate_4k_masq": med(masq4k),
                             "svcgate_4k_preserve": med(pres4k), "ovs_4k": med(ovs), "svcgate_4k_v6": med(sg4k6),
                             "kernel_4k": med(kernel["none"]), "kube_proxy_nft_4k": med(kernel["nft"]),
                             "kube_proxy_iptables_4k": med(kernel["iptables"])},
        "svcgate_rss_kb_1m_flows": med([x for x in rss_1m if x]),
        "established_floor": {"4k": floor4k, "1m": floor1m},
        "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": bool(a.quick),
        "micro_repetitions": micro_reps,
    }
    with open(f"{r}/summary.json", "w") as f:
        json.dump(summary, f, indent=2)

    # Plots.
    if svc:
        plt.figure(figsize=(6, 3.5))
        xs = sorted(svc)
        plt.semilogx(xs, [svc[x] for x in xs], "o-", label="established (macro, net_pcap)")
        if new_svc:
            ys = sorted(new_svc)
            plt.semilogx(ys, [new_svc[y] for y in ys], "s--", label="new flows, 90% full (in-process)")
        plt.xlabel("services")
        plt.ylabel("Mpps, one core")
        plt.ylim(bottom=0)
        plt.legend()
        plt.grid(True, alpha=0.3)
        plt.tight_layout()
        plt.savefig(f"{r}/services.png", dpi=100)
        plt.close()
    if reload_ms:
        plt.figure(figsize=(6, 3.5))
        for name, d in (("svcgate", reload_ms), ("iptables-restore", ipt), ("nft -f", nft)):
            if d:
                xs = sorted(d)
                plt.loglog(xs, [d[x] for x in xs], "o-", label=name)
        plt.xlabel("services (3 endpoints each)")
        plt.ylabel("ms to load")
        plt.legend()
        plt.grid(True, alpha=0.3)
        plt.tight_layout()
        plt.savefig(f"{r}/reload.png", dpi=100)
        plt.close()
    bars = [("testpmd io\n4,096 flows", med(tp4k)), ("testpmd 5tswap\n4,096 flows", med(sw4k)),
            ("svcgate\n4,096 flows", med(sg4k)), ("svcgate masq\n4,096 flows", med(masq4k)),
            ("testpmd io\n1M flows", med(tp1m)), ("testpmd 5tswap\n1M flows", med(sw1m)), ("svcgate\n1M flows", med(sg1m)),
            ("svcgate\n2 workers", med(two)), ("OVS-DPDK LB\n4,096 flows", med(ovs))]
    bars = [(n, v) for n, v in bars if v]
    if bars:
        plt.figure(figsize=(7, 3.5))
        plt.bar([n for n, _ in bars], [v for _, v in bars])
        plt.ylabel("Mpps (64-byte frames)")
        plt.xticks(fontsize=8)
        plt.tight_layout()
        plt.savefig(f"{r}/established.png", dpi=100)
        plt.close()

    lat_names = {"dnat": "svcgate, established DNAT", "dnat_busy": "svcgate, established DNAT, poll: busy",
                 "masq": "svcgate, masqueraded", "new": "svcgate, new flows", "testpmd_5tswap": "testpmd 5tswap (the floor)"}
    if latency_us and any(latency_us.values()):
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
        for ax, q in zip(axes, ("p50", "p99")):
            for k, style in (("dnat", "o-"), ("dnat_busy", "o:"), ("masq", "s-"), ("new", "^-"), ("testpmd_5tswap", "x--")):
                x = latency_us.get(k)
                pts = [(e["offered_mpps"], e["rtt"][q]) for e in (x or {}).get("at", []) if e.get("rtt")]
                if pts:
                    ax.plot([a for a, _ in pts], [b for _, b in pts], style, label=lat_names[k])
            ax.set_yscale("log")
            ax.set_xlabel("offered Mpps")
            ax.set_title(f"round trip through the link, {q}")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel("µs")
        axes[0].legend(fontsize=7)
        plt.tight_layout()
        plt.savefig(f"{r}/latency.png", dpi=100)
        plt.close()

    def f(x, spec="{:.2f}"):
        return "—" if x is None else spec.format(x)

    def lat_mid(k):
        x = (latency_us or {}).get(k)
        e = next((e for e in (x or {}).get("at", []) if e["load"] == 0.5 and e.get("inside")), None)
        return f"{e['inside']['p50']:.2f} / {e['inside']['p99']:.2f}" if e else "—"

    def lat_rows():
        rows = []
        for k, name in lat_names.items():
            x = (latency_us or {}).get(k)
            if not x:
                rows.append(f"| {name} | not measured | | | |")
                continue
            for e in x["at"]:
                if not e.get("rtt"):
                    rows.append(f"| {name} | {e['load']:.0%} | not measured | | |")
                    continue
                rt, ins = e["rtt"], e.get("inside")
                inside = (f"{ins['p50']:.2f} / {ins['p99']:.2f} / {ins['p999']:.2f} / {ins['max']:.0f}" if ins else "—")
                rows.append(f"| {name} | {e['load']:.0%} of {x['max_mpps']:.2f} | {e['offered_mpps']:.2f} "
                            f"({e['lost']:,} lost, {e['late']} late) | {rt['p50']:.2f} / {rt['p99']:.2f} / {rt['p999']:.2f} / "
                            f"{rt['max']:.0f} | {inside} |")
        return "\n".join(rows)

    # A ratio and its interval over the rounds: "0.412 [0.39, 0.43]"; the median to 3 places, so
    # that one just under its target does not read as met when rounded (0.965 as 0.97).
    def fi(key):
        iv = summary["intervals"].get(key)
        return f(summary[key], "{:.3f}") + (f" [{iv['low']:.2f}, {iv['high']:.2f}]" if iv and iv["rounds"] > 1 else "")

    micro_rows = []
    order = {b.get("run_name", b.get("name")): (b.get("family_index", 0), b.get("per_family_instance_index", 0))
             for b in micro}
    for name in sorted(order, key=order.get):  # as declared (interleaving runs them in random order)
        b = micro_entry(name)
        if b is None:
            continue
        ips = b.get("items_per_second")
        extra = ", ".join(f"{k}={b[k]:.0f}" for k in ("bytes_per_flow", "flows", "table") if k in b)
        micro_rows.append(f"| `{name}` | {b['real_time']:.1f} {b['time_unit']} | "
                          f"{'' if ips is None else f'{ips / 1e6:.1f}'} | {extra} |")
    micro_note = (f"Each figure is the median of {micro_reps} repetitions, run interleaved with the other "
                  "benchmarks' (`--benchmark_enable_random_interleaving`)." if micro_reps > 1 else "Each figure is one run.")
    kp = "kube-proxy's"
    kernel_para = (
        f"{kp} own dataplane, the peer every cluster already has (`bench/kube_proxy_peer.py`): the kernel forwarding "
        f"the same capture through {kp} nftables rule set {f(med(kernel['nft']))} Mpps, its iptables rule set "
        f"{f(med(kernel['iptables']))} Mpps, no rule at all (plain forwarding, no conntrack: the ceiling of this setup) "
        f"{f(med(kernel['none']))} Mpps; svcgate {f(med(sg4k))} Mpps on the same capture (ratios "
        f"{f(summary['ratio_vs_kube_proxy_nft'])} and {f(summary['ratio_vs_kube_proxy_iptables'])}). The rules are "
        f"`bench/gen.py nft` and `iptables` for the same 100 Services ({kp} layouts: the service-ips verdict map, "
        "numgen random and DNAT chains; KUBE-SERVICES, statistic random and KUBE-SEP DNAT), with conntrack, as a node "
        "runs them. dpdk-testpmd replays the capture into a veth (`net_af_packet`, CPU 1); receive packet steering "
        "puts the kernel's whole receive and forwarding path on CPU 0, one core as svcgate has; the rate is what "
        "leaves the kernel's other veth. The capture's ACKs are picked up by conntrack as established connections "
        "(`nf_conntrack_tcp_loose`), so, as for svcgate, this is the established path."
        if kernel["nft"] else
        f"{kp} dataplane: `bench/kube_proxy_peer.py` did not produce a rate in this run: **not measured**.")
    scale_rows = "\n".join(
        f"| {w} | {f(v['svcgate'])} | {f(v['testpmd_5tswap'])} | {f(v['dnat_same'])} | {f(v['dnat_cross'])} | "
        f"{f(v['masq_same'])} | {f(v['masq_cross'])} | {f(new_by_w.get(w))} |" for w, v in scale.items())
    md = f"""# svcgate benchmark results

Generated by `bench/run{' --quick' if a.quick else ''}` on {summary['date']} — do not edit by hand.

**Machine**: {summary['machine']}. A shared VM: absolute numbers drift from run to run (±15% and
more), so every headline figure is a ratio of two measurements taken in the same run. A ratio's
brackets are its interval over the rounds, each round's own ratio (`bench/stats.py`: the k-th
smallest and largest, covering the median with 95%, or the range with its coverage: 75% for 3
rounds); `summary.json` has them under `intervals`. **The host's noise in this run**: testpmd
5tswap run twice in each repetition, the second ÷ the first, {fi('host_noise_5tswap')}: a
difference that its spread around 1.0 covers is not above this host's noise.

## Headline figures (`bench/results/summary.json`)

| figure | value | target | how |
|---|---|---|---|
| established flows ÷ testpmd io, 4,096 flows | {fi('established_ratio_vs_testpmd')} | ≥ 0.5 | svcgate {f(med(sg4k))} Mpps, testpmd {f(med(tp4k))} Mpps |
| established flows ÷ testpmd io, 1M flows | {fi('established_ratio_vs_testpmd_1m')} | ≥ 0.5 | svcgate {f(med(sg1m))} Mpps, testpmd {f(med(tp1m))} Mpps |
| established flows ÷ testpmd 5tswap, 4,096 flows | {fi('established_ratio_vs_5tswap')} | ≥ 0.4 | svcgate {f(med(sg4k))} Mpps, 5tswap {f(med(sw4k))} Mpps |
| established flows ÷ testpmd 5tswap, 1M flows | {fi('established_ratio_vs_5tswap_1m')} | ≥ 0.45 | svcgate {f(med(sg1m))} Mpps, 5tswap {f(med(sw1m))} Mpps |
| masqueraded ÷ DNAT-only, established, 4,096 flows | {fi('established_masq_ratio_vs_dnat')} | ≥ 0.9 | NodePorts under policy Cluster (SNAT + DNAT) {f(med(masq4k))} Mpps, ClusterIPs (DNAT) {f(med(sg4k))} Mpps, same config |
| client_ip preserve ÷ masqueraded, established, 4,096 flows | {fi('established_preserve_ratio_vs_masq')} | ≥ 0.95 | the same NodePort packets DNATed only {f(med(pres4k))} Mpps, masqueraded {f(med(masq4k))} Mpps |
| VLAN-tagged ÷ untagged, established, 4,096 flows | {fi('established_vlan_ratio')} | ≥ 0.95 | the port on VLAN 10 of its device, every frame tagged (sorted, untagged, tagged again) {f(med(vlan4k))} Mpps, untagged {f(med(sg4k))} Mpps; the tagged capture's own cost, testpmd 5tswap tagged ÷ untagged: {fi('vlan_ratio_testpmd_5tswap')} ({f(med(sw4kv))} ÷ {f(med(sw4k))} Mpps) |
| 1500 port with a 9000-MTU port beside ÷ without, established, 4,096 flows | {fi('established_jumbo_pool_ratio')} | ≥ 0.97 | the jumbo pool made for the second port (net_null, receives nothing), the 1500 port's frames in the 2 KB pool as before {f(med(jumbo4k))} Mpps, without the second port {f(med(sg4k))} Mpps |
| port at MTU 9000 ÷ 1500, established, 4,096 flows | {fi('established_jumbo_port_ratio')} | reported | the same 64-byte frames received into the jumbo pool's 9 KB mbufs {f(med(jport4k))} Mpps, the 2 KB pool {f(med(sg4k))} Mpps |
| latency sampling on ÷ off, established, 4,096 flows | {fi('latency_sampling_ratio')} | ≥ 0.97 | `dataplane.latency_sampling: 64` (one receive burst in 64 timed) {f(med(lat4k))} Mpps, off {f(med(sg4k))} Mpps |
| time inside the gateway at 50% load, p50 / p99 µs | {lat_mid('dnat')} | reported | established DNAT, svcgate's own histogram (section 12; round trip and the other paths and loads there) |
| svcgate ÷ OVS-DPDK load balancer | {f(summary['ratio_vs_ovs'])} | ≥ 5 | {'OVS ' + f(med(ovs)) + ' Mpps' if ovs else 'not measured (see below)'} |
| svcgate ÷ kube-proxy nftables (the kernel, one core) | {f(summary['ratio_vs_kube_proxy_nft'])} | reported | {'nftables ' + f(med(kernel['nft'])) + ' Mpps, iptables ' + f(med(kernel['iptables'])) + ' Mpps (ratio ' + f(summary['ratio_vs_kube_proxy_iptables']) + '), plain forwarding ' + f(med(kernel['none'])) + ' Mpps' if kernel['nft'] else 'not measured (see below)'} |
| new flows, Mpps per core, table 90% full | {f(new90)} | ≥ 8 | in-process pipeline (10% full: {f(new10)}) |
| IPv6 established ÷ IPv4, 4,096 flows | {fi('established_v6_ratio_vs_v4')} | ≥ 0.85 | svcgate IPv6 {f(med(sg4k6))} Mpps (78-byte frames), IPv4 {f(med(sg4k))} Mpps (64-byte), same run; in-process {f(est_micro_v6)} ÷ {f(est_micro)} Mpps |
| IPv6 new flows, Mpps per core, table 90% full | {f(new90_v6)} | | in-process pipeline, IPv4 {f(new90)} |
| services flatness, established (slowest ÷ fastest) | {f(flat_est)} | ≥ 0.9 | {', '.join(f'{k:,}: {v:.2f}' for k, v in sorted(svc.items()))} Mpps |
| services flatness, new flows (slowest ÷ fastest) | {f(flat_new)} | ≥ 0.9 | {', '.join(f'{k:,}: {v:.2f}' for k, v in sorted(new_svc.items()))} Mpps |
| reload 10,000 Services, ms | {f(summary['reload_10k_ms'], '{:.1f}')} | < 50 | file read → published snapshot, median |
| API: first sync of 10,000 Services + slices, ms | {f(summary['kube_first_sync_10k_ms'], '{:.0f}')} | | both LISTs complete → first snapshot published (tests' API server, loopback) |
| API: network programming p50 / p99, ms | {f(summary['kube_programming_p50_ms'], '{:.0f}')} / {f(summary['kube_programming_p99_ms'], '{:.0f}')} | p99 ≤ min_sync + 100 | {kube.get('changes_per_second', '?')} EndpointSlice edits/s for {kube.get('seconds', '?')} s on 10,000 Services, min_sync_period {kube.get('min_sync_ms', '?')} ms; trigger time → publish done |
| API: publishes per second under that churn | {f(summary['kube_publishes_per_second'])} | ≤ 1 / min_sync | |
| load balancer: first allocation of {f(lb_fast.get('lb_services'), '{:,}')} Services, s (unthrottled / default rate) | {f(summary['lb_first_allocation_unthrottled_s'], '{:.1f}')} / {f(summary['lb_first_allocation_default_rate_s'], '{:.1f}')} | | first creation → last status written (write_qps 20, burst 30 by default: N ÷ 20 s by construction), each written once: {lb_fast.get('services_written_once')}; CPU s writer / reader: {lb_fast.get('writer_cpu_s')} / {lb_fast.get('reader_cpu_s')} (both publish the addresses; the reader writes nothing); the tests' API server in Python on the same 2 cores |
| reload speed-up vs iptables-restore | {f(summary['reload_speedup_vs_iptables'], '{:.0f}')}× | ≥ 50× | iptables-restore {f(ipt.get(10000), '{:.0f}')} ms |
| new flows with replication on ÷ off | {fi('new_flows_sync_ratio')} | ≥ 0.8 | connections proven (a client packet and the reply), in-process, the sync thread on the other core sending to a peer on loopback: {f(med(sync_on))} ÷ {f(med(sync_off))} M/s, median of {len(sync_ratios)} interleaved rounds |
| established / new flows with health checks on ÷ off | {fi('established_checks_ratio')} / {fi('new_flows_checks_ratio')} | ≥ 0.97 | in-process, the prober checking 10,000 endpoints every 2 s (refused connects on loopback) on the other core: established {f(chk_est[0])} → {f(chk_est[1])}, new flows {f(chk_new[0])} → {f(chk_new[1])} M/s (medians); the prober used {f(chk_cpu, '{:.0f}')}% of a core |
| new flows with IPFIX export on ÷ off | {fi('new_flows_ipfix_ratio')} | ≥ 0.9 | in-process, each flow's create logged in the timed burst (its delete in the untimed removal), the exporter on the other core sending to a UDP socket on loopback: {f(ipfix_new[0])} → {f(ipfix_new[1])} M/s (medians); the tables counting each flow's packets and octets as export's do, with no exporter: {fi('new_flows_ipfix_counting_ratio')} of off; the exporter's CPU {f(ipfix_ns, '{:.0f}')} ns an event, so at 1M new flows a second (2M events) {f(ipfix_ns and ipfix_ns * 2e6 / 1e7, '{:.0f}')}% of a core |
| established with IPFIX export on ÷ off | {fi('established_ipfix_ratio')} | | in-process, 4,096 flows: on, each packet counts its flow's packets and octets for the delete's record (a second cache line written): {f(ipfix_est[0])} → {f(ipfix_est[1])} M/s |
| replication bytes per flow | {f(summary['sync_bytes_per_flow'], '{:.1f}')} | | IPv4 records, datagram headers and MACs included (UDP/IP not) |
| bytes per flow at 10M flows | {f(bpf, '{:.0f}')} | ≤ 128 | resident bytes added ÷ flows, both directions; IPv6 {f(bpf6, '{:.0f}')} |
| two workers ÷ one | {f(summary['two_worker_scaling'])} | | see the caveat below |
| scaling efficiency at {wmax} workers, established | {f(summary['scaling_efficiency'])} | | rate at W ÷ (W × rate at 1); testpmd 5tswap on the same queues and cores: {f(summary['scaling_efficiency_testpmd_5tswap'])} (section 7) |
| replies on another queue ÷ on the same, {wmax} workers | {f(summary['cross_queue_ratio'])} | | DNAT only; masqueraded {f(summary['cross_queue_ratio_masq'])} (section 7) |
| svcgate resident size, 1M flows | {f(summary['svcgate_rss_kb_1m_flows'], '{:.0f}')} kB | | VmRSS (hugepage mbufs included) |

## 1. Established flows against the physical limit

![established](results/established.png)

One worker core, one-armed: `net_pcap0,rx_pcap=FLOWS.pcap,infinite_rx=1` (the driver replays
the capture from memory, copying each 60-byte frame into a fresh mbuf; transmit on the same
port is dropped by the driver). svcgate, `dpdk-testpmd --forward-mode=io` and
`--forward-mode=5tswap` (which swaps the MAC and IP addresses and the ports of every packet: the
cost of touching the headers, the floor for any NAT) run on the same port and the same lcores (main on core 0, the forwarding lcore on core 1), one after the other, in a
scratch network namespace. The rate is the port's receive counter over {a.quick and 3 or 6} s after a
{a.quick and 2 or 3} s warm-up, read through the DPDK telemetry socket (`bench/rate.py`). The
capture is ACK-only: its first pass picks each connection up, the later ones are established
flows; each flow is DNATed to one of 3 endpoints of one of 100 Services and forwarded to a pinned
next hop. The masqueraded path: the same flows to the Services' NodePorts on the gateway's node IP,
which kube-proxy masquerades under policy Cluster (SNAT to the gateway's address and a port of its
own, and DNAT), with the same config. Inputs: `bench/gen.py pcap` and `bench/gen.py config`.

### The floor under it

What svcgate's own work may cost at the targets, against what it costs, per packet: the target's
time through the port (0.4 × 5tswap at 4,096 flows, 0.45 × at 1M) less the port's own time
(testpmd io), both from the runs above; then `BM_EstablishedFloor` (in process, the harness's
frame copy taken off), built up in layers: the parse with every check the pipeline makes, + the
bulk flow lookup, + the translation (the flow's other tuple, TTL, checksums) and the MACs; and
the whole pipeline, which adds conntrack, counters, the route and next hop, verdicts and the
transmit queue. One run of each layer (10 Services; the 1M row's table holds 1,048,576 flows in
the same 2M slots as the macro capture's 1,000,000). Cumulative ns a packet:

| flows | budget at the target | parse | + lookup | + NAT, TTL, MACs | whole pipeline |
|---|---|---|---|---|---|
""" + "\n".join(f"| {n} | {f(x['budget_ns'], '{:.1f}')} | {x['parse_ns']:.1f} | {x['lookup_ns']:.1f} | {x['nat_ns']:.1f} | {x['pipeline_ns']:.1f} |"
                if x else f"| {n} | not measured (a layer of `BM_EstablishedFloor` missing or in error) | | | | |"
                for n, x in (("4,096", floor4k), ("1M (1,048,576)", floor1m))) + f"""

## 2. The peer

{('Open vSwitch 3.1 with DPDK (`openvswitch-switch-dpdk`, `bench/ovs_lb`): ' + f(med(ovs)) + ' Mpps, svcgate ' + f(med(sg4k)) + ' Mpps on the same capture, port and cores (ratio ' + f(summary['ratio_vs_ovs']) + '). ' +
  'OVS runs its own ovsdb-server and ovs-vswitchd-dpdk in the bench namespace, one PMD thread on core 1, and the load balancer as ovn-northd lays it out (`bench/gen.py ovs`): every IP packet through `ct(zone=1,nat)`; a new connection to a VIP to a select group (hash of the 4-tuple) whose 3 buckets do `ct(commit,zone=1,nat(dst=endpoint:8080))`; then MACs set, TTL decremented and out of the input port. Each run reports the datapath conntrack entries (4,096) and the transmitted packets with its rate, so a pipeline that drops cannot pass as fast.') if ovs else
 'Open vSwitch with DPDK: `bench/ovs_lb` did not produce a rate in this run (is `openvswitch-switch-dpdk` installed?): **not measured**.'}

{kernel_para}

## 3. New flows

Measured in-process (`BM_PipelineNewFlows`): a replayed capture repeats its flows, so every packet
cannot be a new connection on the macro harness. The pipeline is the workers' own
`process_burst` on mbufs (frame copy included); the table holds 1M flows and is prefilled to 10%
or 90%; each burst of 32 new flows is timed and then removed again, untimed, so the fill stays.

## 4. Scale in services

![services](results/services.png)

Established: the macro harness with 100,000 flows spread over the Services (flow i → Service
i mod S), the service counts measured in interleaved rounds (10, 1k, 10k, 100k, 10, ...) so that
the host's drift falls on each alike; flatness is the slowest ÷ the fastest median. New flows: the
in-process benchmark at 90% fill, slowest ÷ fastest. `services_flatness` is the worse of the two.

## 5. Reload

![reload](results/reload.png)

| services | svcgate (ms, median) | iptables-restore (ms) | nft -f (ms) |
|---|---|---|---|
""" + "\n".join(f"| {s:,} | {f(reload_ms.get(s), '{:.1f}')} | {f(ipt.get(s), '{:.0f}')} | {f(nft.get(s), '{:.0f}')} |"
                for s in sorted(set(reload_ms) | set(ipt) | set(nft))) + f"""

svcgate: `build-bench/bench/reload_bench --benchmark_filter=BM_ReloadCompact` (compact config file →
parsed, validated, snapshot built; the Kubernetes-object form is slower, see bench/README.md).
Netfilter: kube-proxy's own layouts for the same Services (`bench/gen.py iptables|nft`: KUBE-SVC /
KUBE-SEP chains with statistic-mode random; the nftables proxier's service-ips verdict map and
numgen chains), loaded into a fresh network namespace with `iptables-restore` (iptables-nft) and
`nft -f`. Sizes left out (—) take minutes here (`nft -f` needs about a minute at 10,000 Services);
`--quick` skips them.

## 6. Memory

`BM_BytesPerFlow`: a flow table sized for 10M flows, filled; resident bytes added ÷ flows. A flow
is one 64-byte record holding both directions plus two 8-byte index slots at 50% load.

## 7. Two workers

svcgate with two workers, each polling its own receive queue (`net_pcap` with two capture files).
**Caveat**: this machine has 2 cores; the main lcore shares core 0 with the second worker and the
traffic generator is the receive path of each worker itself, so the ratio understates what two
dedicated cores give.

Scaling over worker cores (`bench/run` section 11; W = 1, 2, 4, ... up to all but one of the
host's {os.cpu_count()} cores, 2 at least; one receive queue per worker). Established: each
connection's packets on one queue. Both directions: each client packet followed by a pod's reply
(translated as svcgate translated the connection), the reply on its request's queue (same) or on
the next queue (cross: the reply on another worker, as RSS puts most translated replies); DNAT
only (ClusterIPs) and masqueraded (NodePorts under policy Cluster). New flows:
`BM_PipelineNewFlowsWorkers`, W threads inserting into one shared table 90% full. Mpps,
{'one run' if a.quick else 'medians'}. What sharing the table costs before anything is shared:
one worker alone on a table two workers own (`BM_PipelineNewFlowsTwoOwners`: the inserts' bucket
locks and slot CAS, no second writer) {f(new_two_owners)} M/s, {f(summary["new_flows_two_owners_ratio"])} × the
lone writer's. The host's random-read rate, what many workers' misses share: W threads reading
random lines of a 256 MiB span, 32 at a time (`BM_MemoryLineWorkers`),
{', '.join(f'W = {w}: {v:.1f}' for w, v in mem_by_w.items()) or '—'} M lines/s (efficiency
{f(summary["memory_scaling_efficiency"])} at the largest W); a new flow takes about five such lines.

| workers | established | testpmd 5tswap | DNAT same | DNAT cross | masq same | masq cross | new flows (M/s) |
|---|---|---|---|---|---|---|---|
{scale_rows}

## 8. Micro-benchmarks

`build-bench/bench/micro_bench` (Google Benchmark); items are packets, lookups or inserts.
{micro_note}

| benchmark | time per iteration | M items/s | counters |
|---|---|---|---|
""" + "\n".join(micro_rows) + f"""

## 12. Latency inside the gateway

![latency](results/latency.png)

`bench/latency`, {'one run of each' if a.quick else 'one run of each (single runs)'}. The port is a `net_memif`
link between two processes: svcgate's port (or testpmd 5tswap's, the floor) is its server, and
`bench/pace` its client on core 0, sending the capture paced by the TSC and matching each packet
that comes back to its send time by the number it wrote into the IPv4 identification (neither
svcgate's translation nor 5tswap changes it). The worker or forwarding lcore is on core 1, as in
section 1. A path's rate is first measured with pace sending as fast as the link takes it (the
100% below; the link's copies both ways and pace's own work are in it); then each load is a run of
its own: a fresh gateway, {a.quick and 2 or 3} s of warm-up and {a.quick and 3 or 6} s measured. The
round trip is pace's view (the link both ways, the gateway's receive burst, its work and its
transmit); inside is svcgate's own histogram (`dataplane.latency_sampling: 64`: each packet of one
receive burst in 64, from the return of its receive burst to its transmit call; buckets of a
quarter octave, so a figure is its bucket's upper edge; since the gateway's start, warm-up
included). Beside them, svcgate's DNAT with `dataplane.poll: busy` (spinning through light
load as testpmd does; the default `adaptive` sleeps about 20 µs after a poll of fewer than 8
packets while its worker carries fewer than 100,000 packets a second, and not at all above that
since 9bd9c32: every load here is above it), and the floor. Each path runs at 10%, 50% and 90% of its own rate as fast as the link
takes it (a load above a path's own rate would measure an overload queue); the offered rates are
in the table, each path's rate in `summary.json` (`latency_us.PATH.max_mpps`). New flows: every packet
with a source address and port of its own, so each opens a flow; the table (65,536) is full within
the warm-up and each new flow then evicts a never-answered one, as under a flood. `lost`: sent in
the window and not back; `late`: how often pace fell behind its pace by more than 4 bursts.

How far to read it: the link and pace have a rate of their own. pace sends and receives on one
core (core 0, which svcgate's main lcore shares), and the memif driver copies every frame both
ways in both processes, so 100% here is what the link carries with the gateway behind it, not the
gateway's rate on `net_pcap` (section 1). testpmd 5tswap through the same link, as fast as it takes
them: {f((latency_us or {}).get('testpmd_5tswap') and latency_us['testpmd_5tswap']['max_mpps'])} Mpps,
svcgate's DNAT {f((latency_us or {}).get('dnat') and latency_us['dnat']['max_mpps'])}: where the
two are close, the link is the bound. Near it (90%) pace falls behind (`late`) and queues build in
the link's rings, and the round trip is mostly that queue, for testpmd as for svcgate; the inside
figures are the gateway's own part. A tail of milliseconds at every load, testpmd's too, is this
VM's: a vCPU that stops for that long.

| path | load | offered Mpps | round trip p50 / p99 / p99.9 / max, µs | inside p50 / p99 / p99.9 / max, µs |
|---|---|---|---|---|
""" + lat_rows() + "\n"
    with open(a.out, "w") as fo:
        fo.write(md)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
