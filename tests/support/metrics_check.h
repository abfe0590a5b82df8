// What the metrics collectors' tests check in a text: a whole line, and that every sample's family
// was declared (HELP and TYPE) before it, as Prometheus requires.
#pragma once

#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace svcgate::test {

inline bool has_line(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// Every sample's family was declared (HELP and TYPE) before it.
inline void expect_declared(const std::string& text) {
    std::set<std::string> declared;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# TYPE ", 0) == 0) {
            declared.insert(line.substr(7, line.find(' ', 7) - 7));
        } else if (!line.empty() && line[0] != '#') {
            std::string name = line.substr(0, line.find_first_of("{ "));
            for (const char* suffix : {"_bucket", "_sum", "_count"})
                if (name.ends_with(suffix) && !declared.count(name)) name.resize(name.size() - std::strlen(suffix));
            EXPECT_TRUE(declared.count(name)) << "undeclared: " << line;
        }
    }
}

}  // namespace svcgate::test

using svcgate::test::expect_declared;
using svcgate::test::has_line;
