// The config's fields, declared once: one row per key an operator writes under dataplane, control,
// routing, ha and cluster (services and kubernetes are lists of objects, described by their own
// tables in config/README.md). The table drives the known-key check (keys_under), the numeric
// reads' ranges (field(...).lo/hi), the restart-only list a reload keeps as started
// (keep_restart_fields: a loop over the rows' keeps), and a test that config/README.md documents exactly these keys
// with these defaults and restart marks.
//
// Runs on: any thread (constant data); keep_restart_fields on the control thread at reload.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "control/config/config_model.h"

namespace svcgate::ctl {

struct ConfigField {
    std::string_view section;       // "dataplane"
    std::string_view key;           // "flow_table.capacity", "ports[].mtu", "routes[]"
    std::string_view default_text;  // as config/README.md's default column writes it
    // Takes a restart: a reload keeps the running value (logged). Copies it from `running` into
    // `next`, true when they differed; null: a reload applies the key.
    using Keep = bool (*)(Config& next, const Config& running);
    Keep restart = nullptr;
    uint64_t lo = 0, hi = 0;  // a number's range; 0, 0: not a number read by range
    // The built-in default of a scalar number or switch, to check default_text against; null for
    // the others.
    uint64_t (*builtin)(const Config&) = nullptr;
};

extern const std::vector<ConfigField> kConfigFields;

// The row of section.key; a missing row is a programming error (aborts with its name).
const ConfigField& config_field(std::string_view section, std::string_view key);
// The keys directly under `prefix` of a section ("" for the section's own): {"eal", "workers",
// "ports", ...} for ("dataplane", ""), {"capacity", ...} for ("dataplane", "flow_table"), {"name",
// ...} for ("dataplane", "ports[]").
std::vector<std::string_view> keys_under(std::string_view section, std::string_view prefix);

// What a reload cannot change under running workers is taken from the running config into `next`,
// before the snapshot is built from it. Returns the changed restart fields' names
// ("dataplane.workers, ha"), "" when none.
std::string keep_restart_fields(Config& next, const Config& running);

}  // namespace svcgate::ctl
