// control/config/config_fields.h: the field table is what config/README.md documents (every key,
// its default, its restart mark), its defaults are the code's, its keys are the ones the loader
// knows, and a reload keeps exactly its restart fields.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "control/config/config_fields.h"
#include "control/config/yaml_config.h"
#include "test_support.h"

using namespace svcgate::ctl;

namespace {

struct DocRow {
    std::string default_text;
    bool restart = false;
};

// config/README.md's rows "| `key` | default | meaning |" of the field table's sections, by
// "section.key". A section whose introduction says "every setting takes a restart" marks them all.
std::map<std::string, DocRow> documented() {
    std::ifstream in(std::string(SVCGATE_SOURCE_DIR) + "/config/README.md");
    std::map<std::string, DocRow> rows;
    std::string section;
    bool all_restart = false;
    const std::set<std::string> sections{"dataplane", "control", "routing", "ha", "export", "cluster", "kubernetes"};
    const std::regex heading(R"(^## `(\w+)`)"), row(R"(^\| `([^`]+)` \| (.*?) \| (.*) \|$)");
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_search(line, m, heading)) {
            section = sections.count(m[1]) ? m[1].str() : "";
            all_restart = false;
        } else if (!section.empty() && line.find("every setting takes a restart") != std::string::npos) {
            all_restart = true;
        } else if (!section.empty() && std::regex_match(line, m, row)) {
            rows[section + "." + m[1].str()] =
                DocRow{m[2].str(), all_restart || m[3].str().find("*restart*") != std::string::npos};
        }
    }
    return rows;
}

}  // namespace

TEST(ConfigFields, ReadmeDocumentsExactlyTheTable) {
    const auto doc = documented();
    ASSERT_GT(doc.size(), 30u) << "config/README.md's tables were not found";
    std::set<std::string> table;
    for (const ConfigField& f : kConfigFields) {
        const std::string name = std::string(f.section) + "." + std::string(f.key);
        table.insert(name);
        const auto it = doc.find(name);
        if (it == doc.end()) {
            ADD_FAILURE() << name << " is in the field table but not in config/README.md";
            continue;
        }
        EXPECT_EQ(it->second.default_text, f.default_text) << name << ": the default";
        EXPECT_EQ(it->second.restart, f.restart) << name << ": *restart*";
    }
    for (const auto& [name, row] : doc)
        EXPECT_TRUE(table.count(name)) << name << " is in config/README.md but not in the field table";
}

namespace {

bool scalar(const ConfigField& f) {
    return f.value.kind == ConfigMember::Kind::number || f.value.kind == ConfigMember::Kind::boolean;
}

}  // namespace

TEST(ConfigFields, DefaultsAreTheCodes) {
    // Every number and switch whose documented default is a literal (`1500`, `true`, `0` (no cap))
    // has that value in a config that does not set it.
    const Config cfg = load_config_string("dataplane:\n  ports: [{name: a}]\n");
    unsigned checked = 0;
    for (const ConfigField& f : kConfigFields) {
        if (!scalar(f) || !f.default_text.starts_with('`')) continue;
        std::string text(f.default_text.substr(1));
        text = text.substr(0, text.find('`'));
        const uint64_t want = text == "true" ? 1 : text == "false" ? 0 : std::stoull(text, nullptr, 0);
        EXPECT_EQ(f.value.get(cfg), want) << f.section << "." << f.key;
        ++checked;
    }
    EXPECT_GE(checked, 39u);
}

TEST(ConfigFields, RangesFitTheirMembers) {
    for (const ConfigField& f : kConfigFields) {
        if (f.value.kind != ConfigMember::Kind::number) continue;
        EXPECT_LE(f.lo, f.hi) << f.section << "." << f.key;
        EXPECT_GT(f.hi, 0u) << f.section << "." << f.key << " has no range";
        EXPECT_LE(f.hi, f.value.max) << f.section << "." << f.key << ": its range outgrows its member";
    }
}

namespace {

// `{a: {b: 1}}` for {"a.b": "1"}: a flow map of dotted keys.
std::string flow_yaml(const std::map<std::string, std::string>& values) {
    std::map<std::string, std::map<std::string, std::string>> by_head;
    std::string out = "{";
    for (const auto& [k, v] : values) {
        const auto dot = k.find('.');
        if (dot == std::string::npos)
            out += (out.size() > 1 ? ", " : "") + k + ": " + v;
        else
            by_head[k.substr(0, dot)][k.substr(dot + 1)] = v;
    }
    for (const auto& [head, rest] : by_head) out += (out.size() > 1 ? ", " : "") + head + ": " + flow_yaml(rest);
    return out + "}";
}

}  // namespace

TEST(ConfigFields, TheTableReadsEveryNumberSwitchAndWord) {
    // Each row the table reads, set alone to a value other than its default within its range,
    // reaches its member; one above its range is refused with the table's range.
    char dir[] = "/tmp/svcgate-fields-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::ofstream(std::string(dir) + "/a.key") << std::string(64, 'a') << "\n";
    const std::map<std::string, std::string> base = {
        {"dataplane.ports", "[{name: a}]"},
        {"routing.table", "100"},
        {"ha.listen", "'10.0.0.1:7400'"},
        {"ha.peers", "[10.0.0.2]"},
        {"ha.key_file", "a.key"},
        {"kubernetes.api.kubeconfig", "k"},
        {"cluster.proxy_name", "p"},  // proxy_name_only needs one
        {"export.ipfix.collectors", "['127.0.0.1:4739']"},
    };
    auto load = [&](const std::map<std::string, std::string>& values) {
        const std::string path = std::string(dir) + "/gw.yaml";
        std::ofstream(path) << flow_yaml(values) << "\n";
        return load_config_file(path);
    };
    const Config defaults = load(base);
    unsigned read = 0;
    for (const ConfigField& f : kConfigFields) {
        if (f.value.kind == ConfigMember::Kind::own) continue;
        const std::string name = std::string(f.section) + "." + std::string(f.key);
        auto values = base;
        if (name == "kubernetes.api.in_cluster") values.erase("kubernetes.api.kubeconfig");  // one or the other
        std::string written;
        uint64_t want = 0;
        if (f.value.kind == ConfigMember::Kind::number) {
            const uint64_t d = f.value.get(defaults);
            want = std::max(f.lo, d + 1) <= f.hi ? std::max(f.lo, d + 1) : d - 1;
            written = std::to_string(want);
        } else if (f.value.kind == ConfigMember::Kind::boolean) {
            want = !f.value.get(defaults);
            written = want ? "true" : "false";
        } else {
            written = "word";
        }
        values[name] = written;
        try {
            Config c = load(values);
            if (f.value.kind == ConfigMember::Kind::text)
                EXPECT_EQ(*f.value.text(c), "word") << name;
            else
                EXPECT_EQ(f.value.get(c), want) << name << ": " << written << " not read";
            ++read;
        } catch (const ConfigError& e) {
            ADD_FAILURE() << name << ": " << written << " refused: " << e.what();
        }
        if (f.value.kind != ConfigMember::Kind::number || f.hi == UINT64_MAX) continue;
        values[name] = std::to_string(f.hi + 1);
        try {
            (void)load(values);
            ADD_FAILURE() << name << ": " << f.hi + 1 << " was taken";
        } catch (const ConfigError& e) {
            EXPECT_NE(
                std::string(e.what()).find(fmt::format("{}: {} is out of range {}-{}", name, f.hi + 1, f.lo, f.hi)),
                std::string::npos)
                << e.what();
        }
    }
    EXPECT_GE(read, 45u);
    std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(ConfigFields, KnownKeysAreTheTables) {
    // Every key the table names under a section is taken without a warning; one it does not is refused.
    const Config ok = load_config_string(R"(
dataplane:
  workers: 1
  mbufs: 4096
  one_arm_masquerade: true
  icmp_errors_per_second: 10
  host_path: {control_per_second: 1, other_per_second: 1}
  fragments: {timeout_ms: 1000, max_datagrams: 64, max_held: 8, max_per_datagram: 8}
  flow_table: {capacity: 4096, capacity_v6: 1024, new_flows_per_source: 5, state_max_age: 60}
  ports: [{name: a, device: net_null0, mtu: 1500, addresses: [10.0.0.1/24], mac: '02:00:00:00:00:01'}]
control: {socket_mode: '0600', watch: false, drain_timeout: 5}
cluster: {masquerade_all: false, reject_unknown_port: true, maglev_seed: 3, nodeport_range: 30000-32767}
)");
    EXPECT_TRUE(ok.warnings.empty()) << ok.warnings.front().str();
    try {
        (void)load_config_string("dataplane:\n  ports: [{name: a}]\n  flow_table: {capacityy: 5}\n");
        ADD_FAILURE() << "an unknown key was taken";
    } catch (const ConfigError& e) {
        // Refused, with the table's keys of that section as the known ones and the nearest named.
        ASSERT_EQ(e.issues.size(), 1u);
        EXPECT_NE(e.issues[0].str().find("capacityy: unknown setting; did you mean \"capacity\"?"), std::string::npos)
            << e.issues[0].str();
        for (const std::string_view k : keys_under("dataplane", "flow_table"))
            EXPECT_NE(e.issues[0].message.find(std::string(k)), std::string::npos) << k;
    }
    // A number outside the table's range is an error that names the range.
    try {
        (void)load_config_string("dataplane:\n  ports: [{name: a}]\n  workers: 129\n");
        ADD_FAILURE() << "workers: 129 was taken";
    } catch (const ConfigError& e) {
        // The range is the table's row, not a number written beside the reader.
        const ConfigField& f = config_field("dataplane", "workers");
        EXPECT_NE(std::string(e.what()).find(fmt::format("out of range {}-{}", f.lo, f.hi)), std::string::npos)
            << e.what();
    }
}

TEST(ConfigFields, AReloadKeepsExactlyTheRestartFields) {
    char dir[] = "/tmp/svcgate-fields-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    for (const char* k : {"a.key", "b.key"}) {
        std::ofstream(std::string(dir) + "/" + k) << std::string(64, k[0] == 'a' ? 'a' : 'b') << "\n";
    }
    const std::string base = std::string(R"(
dataplane:
  ports: [{name: a, device: net_null0, addresses: [10.0.0.1/24]}]
routing: {table: 100}
ha: {listen: '10.0.0.1:7400', peers: [10.0.0.2], key_file: a.key, takeover_ports: []}
kubernetes: {api: {kubeconfig: k}, load_balancer: {election: {namespace: n}}}
export: {ipfix: {collectors: ['127.0.0.1:4739']}}
)");
    auto load = [&](const std::string& yaml) {
        const std::string path = std::string(dir) + "/gw.yaml";
        std::ofstream(path) << yaml;
        return load_config_file(path);
    };
    // Per restart field, a change to it in YAML (a string replacement of `base`, or an addition) and
    // the name the reload reports.
    std::map<std::string, std::pair<std::string, std::string>> changes = {
        {"dataplane.eal", {"dataplane:\n", "dataplane:\n  eal: [--no-pci]\n"}},
        {"dataplane.workers", {"dataplane:\n", "dataplane:\n  workers: 2\n"}},
        {"dataplane.mbufs", {"dataplane:\n", "dataplane:\n  mbufs: 8192\n"}},
        {"dataplane.poll", {"dataplane:\n", "dataplane:\n  poll: busy\n"}},
        {"dataplane.latency_sampling", {"dataplane:\n", "dataplane:\n  latency_sampling: 64\n"}},
        {"dataplane.flow_table.capacity",
         {"dataplane:\n", "dataplane:\n  flow_table: {capacity: 4096, capacity_v6: 262144}\n"}},
        {"dataplane.flow_table.capacity_v6", {"dataplane:\n", "dataplane:\n  flow_table: {capacity_v6: 4096}\n"}},
        {"dataplane.flow_table.new_flows_per_source",
         {"dataplane:\n", "dataplane:\n  flow_table: {new_flows_per_source: 9}\n"}},
        {"dataplane.fragments.timeout_ms", {"dataplane:\n", "dataplane:\n  fragments: {timeout_ms: 900}\n"}},
        {"dataplane.fragments.max_datagrams", {"dataplane:\n", "dataplane:\n  fragments: {max_datagrams: 64}\n"}},
        {"dataplane.fragments.max_held", {"dataplane:\n", "dataplane:\n  fragments: {max_held: 8}\n"}},
        {"dataplane.fragments.max_per_datagram", {"dataplane:\n", "dataplane:\n  fragments: {max_per_datagram: 8}\n"}},
        {"dataplane.icmp_errors_per_second", {"dataplane:\n", "dataplane:\n  icmp_errors_per_second: 5\n"}},
        {"dataplane.host_path.control_per_second",
         {"dataplane:\n", "dataplane:\n  host_path: {control_per_second: 5}\n"}},
        {"dataplane.host_path.other_per_second", {"dataplane:\n", "dataplane:\n  host_path: {other_per_second: 5}\n"}},
        {"dataplane.ports[].name", {"name: a,", "name: b,"}},
        {"dataplane.ports[].device", {"net_null0", "net_null1"}},
        {"dataplane.ports[].mtu", {"device: net_null0,", "device: net_null0, mtu: 1400,"}},
        {"dataplane.ports[].vlan", {"device: net_null0,", "device: net_null0, vlan: 10,"}},
        {"dataplane.ports[].host_interface", {"device: net_null0,", "device: net_null0, host_interface: gwx,"}},
        {"dataplane.ports[].mac", {"device: net_null0,", "device: net_null0, mac: '02:00:00:00:00:09',"}},
        {"dataplane.bonds[].name", {"dataplane:\n", "dataplane:\n  bonds: [{name: b0, members: [net_null5]}]\n"}},
        {"dataplane.bonds[].mode",
         {"dataplane:\n", "dataplane:\n  bonds: [{name: b0, mode: active-backup, members: [net_null5]}]\n"}},
        {"dataplane.bonds[].members", {"dataplane:\n", "dataplane:\n  bonds: [{name: b0, members: [x, y]}]\n"}},
        {"dataplane.bonds[].transmit_hash",
         {"dataplane:\n", "dataplane:\n  bonds: [{name: b0, members: [x], transmit_hash: layer2}]\n"}},
        {"routing.table", {"table: 100", "table: 101"}},
        {"ha.listen", {"10.0.0.1:7400", "10.0.0.1:7401"}},
        {"ha.peers", {"[10.0.0.2]", "[10.0.0.3]"}},
        {"ha.key_file", {"a.key", "b.key"}},
        {"ha.takeover_ports", {"takeover_ports: []", "takeover_ports: [a]"}},
        {"ha.refresh_seconds", {"takeover_ports: []", "takeover_ports: [], refresh_seconds: 5"}},
        {"ha.hello_ms", {"takeover_ports: []", "takeover_ports: [], hello_ms: 200"}},
        {"ha.dead_after_ms", {"takeover_ports: []", "takeover_ports: [], dead_after_ms: 2000"}},
        {"control.socket", {"routing:", "control: {socket: /tmp/x.sock}\nrouting:"}},
        {"control.metrics", {"routing:", "control: {metrics: '127.0.0.1:9999'}\nrouting:"}},
        {"kubernetes.api.kubeconfig", {"kubeconfig: k}", "kubeconfig: k2}"}},
        {"kubernetes.api.context", {"kubeconfig: k}", "kubeconfig: k, context: c}"}},
        {"kubernetes.api.in_cluster", {"kubeconfig: k}", "in_cluster: true}"}},
        {"kubernetes.api.min_sync_period_ms", {"kubeconfig: k}", "kubeconfig: k, min_sync_period_ms: 5}"}},
        {"kubernetes.api.watch_timeout_seconds", {"kubeconfig: k}", "kubeconfig: k, watch_timeout_seconds: 5}"}},
        {"kubernetes.api.list_page_size", {"kubeconfig: k}", "kubeconfig: k, list_page_size: 5}"}},
        {"kubernetes.load_balancer.election.namespace", {"namespace: n}", "namespace: m}"}},
        {"kubernetes.load_balancer.election.name", {"namespace: n}", "namespace: n, name: x}"}},
        {"kubernetes.load_balancer.election.lease_duration_s",
         {"namespace: n}", "namespace: n, lease_duration_s: 20}"}},
        {"kubernetes.load_balancer.election.renew_deadline_s", {"namespace: n}", "namespace: n, renew_deadline_s: 9}"}},
        {"kubernetes.load_balancer.election.retry_period_s", {"namespace: n}", "namespace: n, retry_period_s: 3}"}},
        {"export.ipfix.collectors", {"'127.0.0.1:4739'", "'127.0.0.1:4740'"}},
        {"export.ipfix.transport", {"4739']}", "4739'], transport: tcp}"}},
        {"export.ipfix.observation_domain", {"4739']}", "4739'], observation_domain: 9}"}},
        {"export.ipfix.template_refresh_s", {"4739']}", "4739'], template_refresh_s: 9}"}},
        {"export.ipfix.events", {"4739']}", "4739'], events: [create]}"}},
        {"export.ipfix.ring", {"4739']}", "4739'], ring: 4096}"}},
    };
    for (const std::string_view k : keys_under("dataplane", "flow_table.timeouts"))  // all above 5 s by default
        changes[fmt::format("dataplane.flow_table.timeouts.{}", k)] = {
            "dataplane:\n", fmt::format("dataplane:\n  flow_table: {{timeouts: {{{}: 5}}}}\n", k)};
    const Config running = load(base);
    for (const ConfigField& f : kConfigFields) {
        if (!f.restart) continue;
        const std::string name = std::string(f.section) + "." + std::string(f.key);
        const auto it = changes.find(name);
        if (it == changes.end()) {
            ADD_FAILURE() << name << " is a restart field with no change in this test";
            continue;
        }
        std::string yaml = base;
        const auto at = yaml.find(it->second.first);
        ASSERT_NE(at, std::string::npos) << name;
        yaml.replace(at, it->second.first.size(), it->second.second);
        Config next = load(yaml);
        const std::string changed = keep_restart_fields(next, running);
        // A port's fields are reported as the port list, a timeout as the timeouts.
        const std::string want = name.starts_with("dataplane.ports[]") ? "dataplane.ports"
            : name.starts_with("dataplane.bonds[]")                    ? "dataplane.bonds"
            : name.starts_with("dataplane.flow_table.timeouts.")       ? "dataplane.flow_table.timeouts"
                                                                       : name;
        EXPECT_NE(changed.find(want), std::string::npos) << name << ": reported \"" << changed << "\"";
        Config again = next;
        EXPECT_EQ(keep_restart_fields(again, running), "") << name << ": not kept as running";
    }
    // A field a reload applies is not reported.
    std::string yaml = base;
    yaml.replace(yaml.find("10.0.0.1/24"), 11, "10.0.0.1/25");
    Config next = load(yaml);
    EXPECT_EQ(keep_restart_fields(next, running), "");
    std::system((std::string("rm -rf ") + dir).c_str());
}
