// The config's fields, declared once: one row per key an operator writes under dataplane, control,
// routing, ha, cluster and kubernetes (services are a list of objects, described by their own
// table in config/README.md). Each row names its key, its default as documented, the member it is
// read into, its range and whether it takes a restart. The table drives:
//   - the known-key check of each section's maps (keys_under);
//   - the reading of every number, switch and plain word: yaml_config.cpp's read_fields is a
//     loop over the rows; the others (lists, addresses, words from a set) are read by their
//     section's code;
//   - the restart-only list a reload keeps as started (keep_restart_fields, a loop over the rows);
//   - a test that config/README.md documents exactly these keys, defaults and restart marks, and
//     that the documented defaults are the code's.
//
// Runs on: any thread (constant data); keep_restart_fields on the control thread at reload.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "control/config/config_model.h"

namespace svcgate::ctl {

// Where a row's value lives in a Config, and how the table's loops reach it.
struct ConfigMember {
    enum class Kind : uint8_t {
        number,   // an unsigned integer, read within the row's range
        boolean,  // true or false
        text,     // a plain string, taken as written
        own,      // read by its section's code; the table only compares and keeps it
    };
    Kind kind = Kind::own;
    uint64_t (*get)(const Config&) = nullptr;  // number, boolean
    void (*set)(Config&, uint64_t) = nullptr;  // number, boolean
    std::string* (*text)(Config&) = nullptr;   // text
    uint64_t max = 0;                          // number: the member type's largest value
    // The running value into `next`; true when they differed. Null for a row with no member of
    // its own (a port's field: the port list is kept whole; nodeport_range, read into two) and
    // for a member that cannot be compared; ha.key_file's is written by hand (key and path).
    bool (*keep)(Config& next, const Config& running) = nullptr;
};

struct ConfigField {
    std::string_view section;       // "dataplane"
    std::string_view key;           // "flow_table.capacity", "ports[].mtu", "routes[]"
    std::string_view default_text;  // as config/README.md's default column writes it
    ConfigMember value;
    bool restart = false;     // a reload keeps the running value (and logs it)
    uint64_t lo = 0, hi = 0;  // a number's range
};

extern const std::vector<ConfigField> kConfigFields;

// The row of section.key; a missing row is a programming error (aborts with its name).
const ConfigField& config_field(std::string_view section, std::string_view key);
// The part of a row's key under `prefix`: "capacity" for ("flow_table.capacity", "flow_table"),
// the key itself for prefix "", "" when it is not under it.
std::string_view key_under(std::string_view key, std::string_view prefix);
// The keys directly under `prefix` of a section ("" for the section's own): {"eal", "workers",
// "ports", ...} for ("dataplane", ""), {"capacity", ...} for ("dataplane", "flow_table"), {"name",
// ...} for ("dataplane", "ports[]").
std::vector<std::string_view> keys_under(std::string_view section, std::string_view prefix);

// What a reload cannot change under running workers is taken from the running config into `next`,
// before the snapshot is built from it. Returns the changed restart fields' names
// ("dataplane.workers, ha.listen"), "" when none.
std::string keep_restart_fields(Config& next, const Config& running);

}  // namespace svcgate::ctl
