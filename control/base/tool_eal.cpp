#include "control/base/tool_eal.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>

namespace svcgate::ctl {

namespace {
std::once_flag g_once;
rte_mempool* g_pool = nullptr;
Status g_status;  // the first call's
}  // namespace

Status init_tool_eal(const std::string& prog) {
    std::call_once(g_once, [&] {
        std::vector<std::string> args = {prog,
                                         "--no-huge",
                                         "--no-pci",
                                         "--no-shconf",
                                         "-m",
                                         "512",
                                         "--no-telemetry",
                                         "-l",
                                         "0",
                                         "--log-level=lib.*:error",
                                         "--log-level=user1:error"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
            g_status = Status::fail(std::string("EAL initialisation failed: ") + rte_strerror(rte_errno));
            return;
        }
        g_pool = rte_pktmbuf_pool_create("svcgate_tool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
        if (!g_pool) g_status = Status::fail(std::string("mempool creation failed: ") + rte_strerror(rte_errno));
    });
    return g_status;
}

void init_tool_eal_or_abort(const std::string& prog) {
    if (const Status s = init_tool_eal(prog); !s) {
        std::fprintf(stderr, "%s: %s\n", prog.c_str(), s.error().c_str());
        std::abort();
    }
}

rte_mempool* tool_mempool() { return g_pool; }

}  // namespace svcgate::ctl
