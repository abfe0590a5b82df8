#include "control/base/file.h"

#include <fstream>
#include <sstream>

namespace svcgate::ctl {

std::optional<std::string> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return std::nullopt;
    return std::move(ss).str();
}

}  // namespace svcgate::ctl
