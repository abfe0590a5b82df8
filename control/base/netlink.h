// rtnetlink, the little of it svcgate needs: addresses on its host interfaces and the routes of
// its announcement table (announce.h). Requests are acknowledged one by one, so every failure
// comes back as a message naming what failed.
//
// Runs on: the control thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/base/types.h"
#include "control/base/status.h"

namespace svcgate::ctl {

class Netlink {
public:
    Netlink();
    ~Netlink();
    Netlink(const Netlink&) = delete;
    Netlink& operator=(const Netlink&) = delete;

    Status add_address(int ifindex, const dp::IpCidr& a);
    Status del_address(int ifindex, const dp::IpCidr& a);  // one already gone is no failure
    // A route of table `table` to `prefix` through interface `ifindex` (a link route, proto
    // static), added (replacing one to the same prefix) or deleted.
    Status add_route(uint32_t table, const dp::IpCidr& prefix, int ifindex);
    Status del_route(uint32_t table, const dp::IpCidr& prefix);
    // A route of table `table` to `prefix` through the gateway `via` on interface `ifindex` at
    // `metric`, added (replacing one to the same prefix at that metric) or deleted.
    Status add_route_via(uint32_t table, const dp::IpCidr& prefix, const dp::IpAddr& via, int ifindex, uint32_t metric);
    Status del_route_via(uint32_t table, const dp::IpCidr& prefix, uint32_t metric);
    // The prefixes of every route in `table` (both families).
    Status routes(uint32_t table, std::vector<dp::IpCidr>& out);

private:
    // 0 or the kernel's errno for the request.
    int request(void* msg, std::string& err);
    Status request(void* msg, const char* what);
    int fd_ = -1;
    uint32_t seq_ = 0;
};

}  // namespace svcgate::ctl
