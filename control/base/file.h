// A whole file read into memory: configs, manifests, keys, kubeconfigs and tokens.
//
// Runs on: any thread.
#pragma once

#include <optional>
#include <string>

namespace svcgate::ctl {

// The file's bytes; nullopt when it cannot be opened or read (errno says why).
std::optional<std::string> read_file(const std::string& path);

}  // namespace svcgate::ctl
