// A read-only YAML tree for the config and Kubernetes-object loaders, with positions.
//
// Why not yaml-cpp's nodes directly: a reload of 10,000 Services took over a second, half of it
// in yaml-cpp's parser and half walking its nodes. This tree is flat (one vector of nodes, one
// of child indices) and is filled by a scanner for the block YAML that configs and `kubectl -o
// yaml` are written in: block mappings and sequences, flow collections, plain and quoted
// scalars, comments, documents. Anything beyond that (anchors, aliases, tags, block scalars,
// multi-line plain scalars, complex keys, tabs) makes the scanner give up, and the text is
// parsed by yaml-cpp and copied into the same tree - so every input yaml-cpp reads is read, and
// every syntax error is yaml-cpp's message. Positions are yaml-cpp's: 0-based line and column
// of a scalar's first character (its quote), a block sequence's first '-', a flow collection's
// bracket, a block mapping's first key.
//
// The node API is the subset of YAML::Node the loaders use, with the same names.
//
// Runs on: the control thread and the command-line tools.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace svcgate::ctl::ytree {

struct Pos {
    int line = -1, column = -1;  // 0-based; -1: none
    bool is_null() const { return line < 0; }
};

struct ParseError : std::runtime_error {
    Pos mark;
    std::string msg;
    ParseError(Pos m, std::string s) : std::runtime_error(s), mark(m), msg(std::move(s)) {}
};

enum class Kind : uint8_t { null, scalar, sequence, map };

struct Rec {
    Kind kind = Kind::null;
    int line = 0, column = 0;
    uint32_t first = 0, count = 0;  // children in Tree::kids; a map's are key, value, key, value...
    std::string scalar;
};

struct Tree {
    std::vector<Rec> nodes;
    std::vector<uint32_t> kids;
    std::vector<uint32_t> roots;  // one per document
};

class Node {
public:
    Node() = default;  // undefined: what a missing key gives
    Node(const Tree* t, uint32_t i) : t_(t), i_(i) {}

    explicit operator bool() const { return t_ != nullptr; }
    bool IsDefined() const { return t_ != nullptr; }
    bool IsNull() const { return t_ && rec().kind == Kind::null; }
    bool IsScalar() const { return t_ && rec().kind == Kind::scalar; }
    bool IsSequence() const { return t_ && rec().kind == Kind::sequence; }
    bool IsMap() const { return t_ && rec().kind == Kind::map; }
    const std::string& Scalar() const;  // "" unless a scalar
    size_t size() const { return t_ && rec().kind != Kind::scalar ? rec().count : 0; }
    Pos Mark() const { return t_ ? Pos{rec().line, rec().column} : Pos{}; }

    Node operator[](std::string_view key) const;  // a map's value; undefined when absent
    Node operator[](const char* key) const { return (*this)[std::string_view(key)]; }
    Node operator[](const std::string& key) const { return (*this)[std::string_view(key)]; }
    Node operator[](size_t i) const;  // a sequence's item
    Node operator[](int i) const { return (*this)[static_cast<size_t>(i)]; }

    template <typename T>
    T as(const T& fallback) const {
        return IsScalar() ? T(Scalar()) : fallback;
    }

    // Iteration: a sequence yields its items; a map yields entries with .first and .second.
    class iterator;
    iterator begin() const;
    iterator end() const;

private:
    friend class iterator;
    const Rec& rec() const { return t_->nodes[i_]; }
    const Tree* t_ = nullptr;
    uint32_t i_ = 0;
};

struct Entry : Node {
    Node first, second;
};

class Node::iterator {
public:
    iterator(const Node* n, uint32_t k) : n_(n), k_(k) {}
    Entry operator*() const;
    iterator& operator++() {
        ++k_;
        return *this;
    }
    bool operator!=(const iterator& o) const { return k_ != o.k_; }

private:
    const Node* n_;
    uint32_t k_;
};

inline Node::iterator Node::begin() const { return iterator(this, 0); }
inline Node::iterator Node::end() const { return iterator(this, static_cast<uint32_t>(size())); }

// A parsed stream: owns the tree its nodes point into.
class Stream {
public:
    // Throws ParseError for text that is not YAML.
    static Stream parse(std::string_view text);
    std::vector<Node> documents() const;
    bool used_fallback() const { return fallback_; }

private:
    std::unique_ptr<Tree> tree_;
    bool fallback_ = false;
};

// The scanner alone: false when the text needs the full parser (for tests).
bool scan_fast(std::string_view text, Tree& out);

}  // namespace svcgate::ctl::ytree
