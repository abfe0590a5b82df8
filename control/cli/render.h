// svcgatectl's text tables: the daemon answers every command in JSON (control/api/command_table.h);
// this is where an answer becomes what an operator reads, so the table and --json always show the
// same things.
//
// Runs on: svcgatectl.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "control/api/command_table.h"
#include "control/base/status.h"

namespace svcgate::ctl {

// The text of `result`, the answer of the command `req` names, into `text`; fails when the
// answer is not what this svcgatectl reads (another version's daemon).
Status render_answer(const CommandRequest& req, const nlohmann::ordered_json& result, std::string& text);

}  // namespace svcgate::ctl
