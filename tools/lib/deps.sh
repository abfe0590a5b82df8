# Debian packages, installed only when missing, in two sets: what svcgate and svcgatectl need to
# build and run the lab (tools/demo, tools/lab: a quick start installs only these), and what the
# tests, the sanitizer builds, the package and the man pages need besides (tools/test).
SVCGATE_BUILD_DEPS=(meson ninja-build g++ pkg-config dpdk-dev libdpdk-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev
                    libcpp-httplib-dev libcurl4-openssl-dev libssl-dev libboost-program-options-dev libsystemd-dev libsodium-dev python3 python3-yaml)
# What the lab, the demo and the end-to-end tests run: real programs in network namespaces (and
# openssl: the certificates of the tests' API server, tools/demo --kube-api).
SVCGATE_LAB_DEPS=(iproute2 librte-net-af-xdp23 iputils-ping ethtool tcpdump curl dnsmasq-base dnsutils python3-scapy openssl)
# The unit tests and benchmarks (GoogleTest, Google Benchmark); the sanitizer and fuzzing builds of
# tools/test (clang: libFuzzer, ASan, UBSan, TSan); the Debian package (tools/package) and its
# checks (debhelper, lintian, systemd-analyze); the man pages (pandoc); the format check.
SVCGATE_TEST_DEPS=(libgtest-dev libbenchmark-dev clang libclang-rt-14-dev debhelper lintian systemd pandoc clang-format universal-ctags)

# install_packages PACKAGE...: those not installed yet.
install_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}
# install_deps [EXTRA-PACKAGE...]: everything (tools/test, tools/package, bench/run).
install_deps() { install_packages "${SVCGATE_BUILD_DEPS[@]}" "${SVCGATE_LAB_DEPS[@]}" "${SVCGATE_TEST_DEPS[@]}" "$@"; }
# install_lab_deps: what the demo and the lab need, no more.
install_lab_deps() { install_packages "${SVCGATE_BUILD_DEPS[@]}" "${SVCGATE_LAB_DEPS[@]}"; }

# build_daemon: svcgate and svcgatectl in build/, and nothing else (the demo's and the lab's
# build). A build/ made here has no tests or benchmarks configured; tools/test turns them on.
build_daemon() {
    if [ ! -d build ]; then meson setup build -Dtests=false -Dbench=false >/dev/null || return 1; fi
    ninja -C build control/svcgate control/svcgatectl >/dev/null
}

# install_guarded PACKAGE...: installs without starting the packaged services on the machine (bird2
# would run BIRD in the root namespace; every routing daemon of the lab runs in a namespace the
# lab creates): a policy-rc.d that refuses every start is in place for the install, and the units
# are left disabled.
install_guarded() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local guard=/usr/sbin/policy-rc.d had=0
    [ -e $guard ] && had=1 && cp $guard /tmp/svcgate-policy-rc.d.saved
    printf '#!/bin/sh\nexit 101\n' > $guard && chmod +x $guard
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    local rc=$?
    if [ $had = 1 ]; then mv /tmp/svcgate-policy-rc.d.saved $guard; else rm -f $guard; fi
    command -v systemctl >/dev/null && systemctl disable bird nftables nfdump >/dev/null 2>&1
    return $rc
}

# Debian's kubectl (kubernetes-client, 1.20) at $KUBECTL, whatever else owns /usr/bin/kubectl (an
# image may carry Google Cloud SDK's, whose package owns that path): Debian's file is diverted
# there, so the tests and the demo run the kubectl the README names on every machine.
KUBECTL=/usr/bin/kubectl-1.20
install_kubectl() {
    [ -x $KUBECTL ] && return 0
    dpkg-divert --list /usr/bin/kubectl | grep -q "$KUBECTL" ||
        dpkg-divert --quiet --package kubectl --no-rename --divert $KUBECTL --add /usr/bin/kubectl
    install_packages kubernetes-client
}

# The HA lab (tools/lib/ha.sh): BIRD for BGP and BFD, nftables for the router's connection pinning;
# nfdump's nfcapd, the IPFIX collector of tests/e2e/ipfix_e2e.py (its packaged service not started),
# and libfixbuf's ipfixDump, which decodes its IPFIX over TCP.
install_ha_deps() { install_guarded bird2 nftables nfdump libfixbuf-tools; }

# install_prometheus: Debian's prometheus (the server and promtool) for the end-to-end test, which
# runs its own inside the lab. Installing must not start the packaged service on the machine: a
# policy-rc.d that refuses every start is in place for the install (invoke-rc.d and
# deb-systemd-invoke honour it), and the unit is left disabled.
install_prometheus() {
    dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q "install ok installed" && return 0
    local guard=/usr/sbin/policy-rc.d had=0
    [ -e $guard ] && had=1 && cp $guard /tmp/svcgate-policy-rc.d.saved
    printf '#!/bin/sh\nexit 101\n' > $guard && chmod +x $guard
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    local rc=$?
    if [ $had = 1 ]; then mv /tmp/svcgate-policy-rc.d.saved $guard; else rm -f $guard; fi
    command -v systemctl >/dev/null && systemctl disable prometheus >/dev/null 2>&1
    return $rc
}
