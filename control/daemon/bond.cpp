#include "control/daemon/bond.h"

#include <algorithm>

#include <rte_eth_bond.h>
#include <rte_eth_bond_8023ad.h>
#include <rte_ethdev.h>

namespace svcgate::ctl {

std::vector<BondMemberView> bond_members(uint16_t bond) {
    std::vector<BondMemberView> v;
    const int mode = rte_eth_bond_mode_get(bond);
    if (mode < 0) return v;
    uint16_t members[RTE_MAX_ETHPORTS], active[RTE_MAX_ETHPORTS];
    const int n = rte_eth_bond_slaves_get(bond, members, RTE_MAX_ETHPORTS);
    const int n_active = rte_eth_bond_active_slaves_get(bond, active, RTE_MAX_ETHPORTS);
    for (int i = 0; i < n; ++i) {
        BondMemberView m;
        char name[RTE_ETH_NAME_MAX_LEN] = {};
        if (rte_eth_dev_get_name_by_port(members[i], name) == 0) m.device = name;
        rte_eth_link link{};
        m.link = rte_eth_link_get_nowait(members[i], &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
        struct rte_eth_bond_8023ad_slave_info info {};
        if (mode == BONDING_MODE_8023AD && rte_eth_bond_8023ad_slave_info(bond, members[i], &info) == 0) {
            m.lacp = true;
            m.actor_state = info.actor_state;
            m.partner_state = info.partner_state;
            m.active = info.actor_state & STATE_DISTRIBUTING;
        } else if (mode == BONDING_MODE_ACTIVE_BACKUP) {
            m.active = rte_eth_bond_primary_get(bond) == members[i];
        } else {
            m.active = std::find(active, active + std::max(n_active, 0), members[i]) != active + std::max(n_active, 0);
        }
        v.push_back(std::move(m));
    }
    return v;
}

}  // namespace svcgate::ctl
