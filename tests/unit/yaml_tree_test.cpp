// The fast YAML scanner against yaml-cpp: the same tree (kinds, scalars, positions) for every
// YAML file in the project and for the shapes configs use; what it does not handle goes to
// yaml-cpp, and is read all the same.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "control/config/yaml_tree.h"

using namespace svcgate::ctl;

namespace {

// Empty when equal; else where they differ.
std::string diff(const YAML::Node& a, const ytree::Node& b, const std::string& path) {
    const bool anull = a.IsNull(), bnull = b.IsNull();
    if (anull || bnull) return anull == bnull ? "" : path + ": null on one side only";
    if (a.IsScalar() != b.IsScalar() || a.IsSequence() != b.IsSequence() || a.IsMap() != b.IsMap())
        return path + ": kinds differ";
    const YAML::Mark m = a.Mark();
    if (m.line != b.Mark().line || m.column != b.Mark().column)
        return path + ": position " + std::to_string(m.line) + ":" + std::to_string(m.column) + " vs " +
            std::to_string(b.Mark().line) + ":" + std::to_string(b.Mark().column);
    if (a.IsScalar())
        return a.Scalar() == b.Scalar() ? "" : path + ": \"" + a.Scalar() + "\" vs \"" + b.Scalar() + "\"";
    if (a.size() != b.size()) return path + ": sizes differ";
    if (a.IsSequence()) {
        for (size_t i = 0; i < a.size(); ++i)
            if (auto d = diff(a[i], b[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
        return "";
    }
    auto ai = a.begin();
    auto bi = b.begin();
    for (size_t i = 0; i < a.size(); ++i, ++ai, ++bi) {
        const auto be = *bi;
        if (auto d = diff(ai->first, be.first, path + ".<key>"); !d.empty()) return d;
        if (auto d = diff(ai->second, be.second, path + "." + ai->first.as<std::string>("?")); !d.empty()) return d;
    }
    return "";
}

// The scanner must take `text` itself and agree with yaml-cpp.
void same_as_yaml_cpp(const std::string& text, const std::string& what) {
    ytree::Tree t;
    ASSERT_TRUE(ytree::scan_fast(text, t)) << what << ": the scanner gave up";
    const std::vector<YAML::Node> ref = YAML::LoadAll(text);
    ytree::Stream s = ytree::Stream::parse(text);
    ASSERT_FALSE(s.used_fallback());
    const auto docs = s.documents();
    ASSERT_EQ(docs.size(), ref.size()) << what;
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(diff(ref[i], docs[i], "doc" + std::to_string(i)), "") << what;
}

}  // namespace

TEST(YamlTree, EveryYamlFileOfTheProjectReadsAsYamlCppReadsIt) {
    size_t files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(SVCGATE_SOURCE_DIR)) {
        const auto p = e.path().string();
        if (e.path().extension() != ".yaml" || p.find("/build") != std::string::npos) continue;
        std::ifstream in(p);
        std::stringstream ss;
        ss << in.rdbuf();
        same_as_yaml_cpp(ss.str(), p);
        ++files;
    }
    EXPECT_GT(files, 100u);  // the configs, the conformance cases, the e2e objects
}

TEST(YamlTree, ShapesConfigsAndKubectlUse) {
    const char* cases[] = {
        "a: 1\nb: two words  # comment\nc:\n  d: [1, 2, {e: f}]\n  g: {h: 'i''j', k: \"l\\tm\\u00e9\"}\n",
        "list:\n- a\n- b: 1\n  c: 2\n-\n  - x\n  - y\n- - nested\n  - seq\nafter: 3\n",
        "key:\n  - 1\n  -   spaced\n",
        "empty_map: {}\nempty_seq: []\nnull1:\nnull2: ~\nnull3: null\nlast: x\n",
        "- apiVersion: v1\n  kind: Service\n  metadata: {name: x, labels: {kubernetes.io/service-name: y}}\n",
        "---\na: 1\n---\nb: 2\n...\n",
        "---\n---\n",
        "a: 1\n---\n",
        "# only a comment\n",
        "",
        "multi: [a,\n  b, c]\nflow: {x: 1,\n   y: 2}\n",
        "url: http://x:80/y\ncolon:in:plain: v\nhash: a#b\ndash: -5\n",
        "'quoted key': 1\n\"dq key\": 2\n",
        "ports: [{port: 80, nodePort: 30001}, {name: '', port: 53}]\n",
        "deep:\n  a:\n    b:\n      c: d\n  e: f\n",
        "scalar only\n",
        "a: 'x' \nb: \"y\"   # c\n",
        "note: a long line\n  folded once\n\n  and after an empty line\nnext: 1\n",
        "- name: x\n  note: long\n    text\n- y\n",
        "q: \"double\n  quoted\\\n  joined\"\ns: 'single\n  quoted'\n",
    };
    for (const char* c : cases) same_as_yaml_cpp(c, std::string("case: ") + c);
}

TEST(YamlTree, WhatTheScannerLeavesToYamlCppIsStillRead) {
    const char* cases[] = {
        "a: &x 1\nb: *x\n",                   // anchors
        "text: |\n  line one\n  line two\n",  // block scalars
        "a:\n  - b\n c: d\n",                 // an error for yaml-cpp to name
        "a:\r\n  b: 1\r\n",                   // CRLF
        "a:\n\tb: 1\n",                       // tab (an error)
        "!tag a: b\n",                        // tags
        "? complex\n: key\n",                 // explicit keys
    };
    for (const char* c : cases) {
        ytree::Tree t;
        EXPECT_FALSE(ytree::scan_fast(c, t)) << c;
        std::vector<YAML::Node> ref;
        try {
            ref = YAML::LoadAll(c);
        } catch (const YAML::Exception& e) {
            EXPECT_THROW(ytree::Stream::parse(c), ytree::ParseError) << c;
            continue;
        }
        ytree::Stream s = ytree::Stream::parse(c);
        EXPECT_TRUE(s.used_fallback());
        ASSERT_EQ(s.documents().size(), ref.size()) << c;
        for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(diff(ref[i], s.documents()[i], "doc"), "") << c;
    }
}

TEST(YamlTree, BrokenYamlIsAPositionedError) {
    try {
        ytree::Stream::parse("a: [1, 2\nb: 3\n");
        FAIL() << "accepted";
    } catch (const ytree::ParseError& e) {
        EXPECT_FALSE(e.mark.is_null());
        EXPECT_FALSE(e.msg.empty());
    }
    EXPECT_THROW(ytree::Stream::parse("a: b: c\n"), ytree::ParseError);
    EXPECT_THROW(ytree::Stream::parse("{a: 1\n"), ytree::ParseError);
}

// Found by fuzz_config: yaml-cpp 0.7's LoadAll reports null documents at the same place forever on
// these (memory grows until the process is killed). They are positioned errors, in bounded time.
TEST(YamlTree, StreamsYamlCppCannotGetPastAreErrorsNotEndlessDocuments) {
    for (const char* text : {"\n,\n    ", "a: 1\n,\nb: 2\n", "workers: 1\n  ,workers: 1\n  ports:\n"}) {
        try {
            ytree::Stream::parse(text);
            ADD_FAILURE() << "accepted: " << text;
        } catch (const ytree::ParseError& e) {
            EXPECT_FALSE(e.mark.is_null()) << text;
            EXPECT_FALSE(e.msg.empty()) << text;
        }
    }
}
