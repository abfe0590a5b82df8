# bench/lib.sh: what the scripts that run DPDK through a port share (bench/run, bench/profile),
# sourced from the repository's root: the optimised build, and a scratch lab of hugepages and a
# network namespace that is put back as it was however the script ends.
#
# bench_build [TARGET...]: builds build-bench/ (release, LTO, profile-guided: tools/pgo-build; the
# targets given, or all), as the Debian package's release build is made.
bench_build() {
    [ -d build-bench ] || meson setup build-bench --buildtype=release -Db_lto=true -Dtests=false >/dev/null || return 1
    local log=build-bench/meson-logs/bench-build.log
    tools/pgo-build build-bench "$@" >"$log" 2>&1 ||
        { tail -20 "$log" >&2; echo "bench_build: tools/pgo-build failed (its whole output: $log)" >&2; return 1; }
}

# bench_lab_up NS PREFIX: raises the 2 MiB hugepages to 1,600 (the 1M-flow capture's pool: net_pcap
# keeps every packet of it in mbufs), mounts hugetlbfs if it is not, and adds the network namespace
# NS. PREFIX is the DPDK file prefix of every process the script starts (its hugepage files and
# run-time directory are removed on the way down).
bench_lab_up() {
    bench_ns=$1 bench_prefix=$2
    bench_hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
    bench_hp_before=$(cat $bench_hp)
    [ "$bench_hp_before" -lt 1600 ] && echo 1600 >$bench_hp
    mountpoint -q /dev/hugepages || { mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages; }
    ip netns add "$bench_ns" 2>/dev/null || [ -e "/run/netns/$bench_ns" ]  # added, or left by a run before
}

# bench_lab_down: the namespace gone, then the prefix's hugepage files (DPDK leaves them behind,
# and they hold their pages: gone before the pool shrinks), then the pool back to its size.
# Called by the script's own clean-up, after it has stopped its processes.
bench_lab_down() {
    [ -n "${bench_ns:-}" ] || return 0
    ip netns del "$bench_ns" 2>/dev/null
    rm -f /dev/hugepages/"$bench_prefix"*
    rm -rf /var/run/dpdk/"$bench_prefix"*
    echo "$bench_hp_before" >$bench_hp
    bench_ns=""
}
