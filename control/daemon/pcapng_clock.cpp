// The packet time of a capture (dpdk-dumpcap) on the wall clock, as tcpdump's.
//
// DPDK 22.11's rte_pcapng_copy, which pdump's callbacks run in this process for each captured
// packet, converts the burst's TSC to nanoseconds through one static time base that every lcore
// advances without a lock (lib/pcapng/rte_pcapng.c, pcapng_tsc_to_ns). A worker whose TSC reading
// predates another lcore's advance of the base gets a negative delta, read as 2^64 cycles: the
// base jumps by 2^64 x 1e9 / tsc_hz ns (278 years at 2.1 GHz; 13 h 30 min 44.624 s modulo a day,
// the skew the demo's capture showed) and stays so for the process's life. Upstream fixed it in
// 23.11 (commit 166591931b, "pcapng: modify timestamp calculation"), which changed the API and was
// not taken into 22.11's stable branch.
//
// The daemon links DPDK statically (meson.build: dpdk_link), so the call is wrapped
// (-Wl,--wrap=rte_pcapng_copy): DPDK's copy is made, then its Enhanced Packet Block's time is
// rewritten from CLOCK_REALTIME, read once per burst and less the few microseconds since the
// burst's TSC reading. 22.11's layout: the block is prepended at the data's start, its 4th and 5th
// 32-bit words the time in the interface's resolution, nanoseconds (if_tsresol 9). A shared
// build (-Ddpdk_link=shared) cannot wrap a call inside librte_pdump.so and keeps DPDK's time.
//
// Runs on: worker lcores and the control thread (pdump's rx/tx callbacks), only while a capture
// is attached. State is per thread.
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_pcapng.h>
#include <rte_version.h>

#include <ctime>

static_assert(RTE_VERSION >= RTE_VERSION_NUM(22, 11, 0, 0) && RTE_VERSION < RTE_VERSION_NUM(23, 0, 0, 0),
              "the Enhanced Packet Block's layout and rte_pcapng_copy's signature are 22.11's");

extern "C" {
rte_mbuf* __real_rte_pcapng_copy(uint16_t port, uint32_t queue, const rte_mbuf* m, rte_mempool* mp, uint32_t length,
                                 uint64_t cycles, rte_pcapng_direction direction);

rte_mbuf* __wrap_rte_pcapng_copy(uint16_t port, uint32_t queue, const rte_mbuf* m, rte_mempool* mp, uint32_t length,
                                 uint64_t cycles, rte_pcapng_direction direction) {
    rte_mbuf* mc = __real_rte_pcapng_copy(port, queue, m, mp, length, cycles, direction);
    if (!mc || rte_pktmbuf_data_len(mc) < 5 * sizeof(uint32_t)) return mc;
    // pdump reads the TSC once per burst: one clock read per burst, not per packet.
    thread_local uint64_t last_cycles = 0, last_ns = 0;
    if (cycles != last_cycles || last_ns == 0) {
        timespec ts{};
        clock_gettime(CLOCK_REALTIME, &ts);
        const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
        const uint64_t now_cycles = rte_get_tsc_cycles();
        const uint64_t lag = now_cycles > cycles ? static_cast<uint64_t>(static_cast<double>(now_cycles - cycles) *
                                                                         1e9 / static_cast<double>(rte_get_tsc_hz()))
                                                 : 0;
        last_ns = now - (lag < now ? lag : 0);
        last_cycles = cycles;
    }
    auto* epb = rte_pktmbuf_mtod(mc, uint32_t*);  // block type, length, interface, time high, time low
    epb[3] = static_cast<uint32_t>(last_ns >> 32);
    epb[4] = static_cast<uint32_t>(last_ns);
    return mc;
}
}
