#include "control/kube/json_tree.h"

#include <algorithm>

#include <fmt/format.h>

namespace svcgate::ctl::kube {

namespace {

// Appends v's node and its subtree; returns v's index. A container's children are written as a
// contiguous run of Tree::kids (keys and values alternating for a map), as the scanner does.
uint32_t add(ytree::Tree& t, const nlohmann::json& v) {
    const auto self = static_cast<uint32_t>(t.nodes.size());
    t.nodes.push_back(ytree::Rec{});
    ytree::Rec r;
    if (v.is_object() || v.is_array()) {
        std::vector<uint32_t> kids;
        kids.reserve(v.is_object() ? 2 * v.size() : v.size());
        if (v.is_object()) {
            r.kind = ytree::Kind::map;
            for (auto it = v.begin(); it != v.end(); ++it) {
                const auto k = static_cast<uint32_t>(t.nodes.size());
                t.nodes.push_back(ytree::Rec{.kind = ytree::Kind::scalar, .scalar = it.key()});
                kids.push_back(k);
                kids.push_back(add(t, it.value()));
            }
            r.count = static_cast<uint32_t>(v.size());
        } else {
            r.kind = ytree::Kind::sequence;
            for (const auto& item : v) kids.push_back(add(t, item));
            r.count = static_cast<uint32_t>(kids.size());
        }
        r.first = static_cast<uint32_t>(t.kids.size());
        t.kids.insert(t.kids.end(), kids.begin(), kids.end());
    } else if (v.is_string()) {
        r.kind = ytree::Kind::scalar;
        r.scalar = v.get_ref<const std::string&>();
    } else if (!v.is_null()) {
        r.kind = ytree::Kind::scalar;
        r.scalar = v.dump();  // 80, true, 1.5
    }
    t.nodes[self] = std::move(r);
    return self;
}

// The deepest nesting of arrays and objects in `text`, counted outside strings; stops counting
// past `limit`.
unsigned nesting(std::string_view text, unsigned limit) {
    unsigned depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            deepest = std::max(deepest, ++depth);
            if (deepest > limit) return deepest;
        } else if ((c == '}' || c == ']') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

}  // namespace

nlohmann::json parse_bounded(std::string_view text, std::string& why) {
    if (nesting(text, kMaxJsonDepth) > kMaxJsonDepth) {
        why = fmt::format("nested deeper than {} levels", kMaxJsonDepth);
        return nlohmann::json(nlohmann::json::value_t::discarded);
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) why = "not JSON";
    return j;
}

std::shared_ptr<const ytree::Tree> json_tree(const nlohmann::json& v) {
    auto t = std::make_shared<ytree::Tree>();
    t->roots.push_back(add(*t, v));
    return t;
}

const nlohmann::json* member(const nlohmann::json& o, const char* key) {
    if (!o.is_object()) return nullptr;
    const auto it = o.find(key);
    return it == o.end() ? nullptr : &*it;
}

std::string string_at(const nlohmann::json& o, const char* a, const char* b) {
    const nlohmann::json* x = member(o, a);
    const nlohmann::json* y = x ? member(*x, b) : nullptr;
    return y && y->is_string() ? y->get<std::string>() : std::string();
}

}  // namespace svcgate::ctl::kube
