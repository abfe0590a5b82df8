#include "control/config/yaml_tree.h"

#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace svcgate::ctl::ytree {

const std::string& Node::Scalar() const {
    static const std::string empty;
    return t_ && rec().kind == Kind::scalar ? rec().scalar : empty;
}

Node Node::operator[](std::string_view key) const {
    if (!IsMap()) return {};
    const Rec& r = rec();
    for (uint32_t k = 0; k < r.count; ++k) {
        const Rec& kr = t_->nodes[t_->kids[r.first + 2 * k]];
        if (kr.kind == Kind::scalar && kr.scalar == key) return Node(t_, t_->kids[r.first + 2 * k + 1]);
    }
    return {};
}

Node Node::operator[](size_t i) const {
    if (!IsSequence() || i >= rec().count) return {};
    return Node(t_, t_->kids[rec().first + i]);
}

Entry Node::iterator::operator*() const {
    const Tree* t = n_->t_;
    const Rec& r = n_->rec();
    Entry e;
    if (r.kind == Kind::map) {
        e.first = Node(t, t->kids[r.first + 2 * k_]);
        e.second = Node(t, t->kids[r.first + 2 * k_ + 1]);
        static_cast<Node&>(e) = e.second;
    } else {
        static_cast<Node&>(e) = Node(t, t->kids[r.first + k_]);
    }
    return e;
}

namespace {

struct Unsupported {};  // the scanner gives the text to yaml-cpp

class Scanner {
public:
    Scanner(std::string_view s, Tree& t) : s_(s), t_(t) {}

    void stream() {
        for (char c : s_)
            if (c == '\r' || c == '\t') throw Unsupported{};  // CRLF, tab indentation: yaml-cpp's job
        if (!s_.empty() && static_cast<unsigned char>(s_[0]) == 0xEF) throw Unsupported{};  // BOM
        advance();
        bool have_root = false;     // the current document has its root
        bool explicit_doc = false;  // the current document was opened by "---"
        while (!eof_) {
            if (doc_marker()) {
                const bool open = s_[p_] == '-';
                if (explicit_doc && !have_root) t_.roots.push_back(null_at(line_, 0));  // an empty document
                p_ += 3;
                line_end();
                advance();
                explicit_doc = open;
                have_root = false;
                continue;
            }
            if (have_root || s_[p_] == '%') throw Unsupported{};  // two roots; directives
            t_.roots.push_back(node_here());
            have_root = true;
        }
        if (explicit_doc && !have_root) t_.roots.push_back(null_at(line_, 0));
    }

private:
    // --- positions ---
    int col() const { return static_cast<int>(p_ - line_start_); }
    bool ws(size_t q) const { return q >= s_.size() || s_[q] == ' ' || s_[q] == '\n'; }
    bool marker(const char* m) const { return col() == 0 && s_.compare(p_, 3, m) == 0 && ws(p_ + 3); }
    void skip_spaces() {
        while (p_ < s_.size() && s_[p_] == ' ') ++p_;
    }
    bool at_eol() const {
        return p_ >= s_.size() || s_[p_] == '\n' || (s_[p_] == '#' && (p_ == line_start_ || s_[p_ - 1] == ' '));
    }
    // Past the rest of this line (spaces and a comment only).
    void line_end() {
        skip_spaces();
        if (!at_eol()) throw Unsupported{};
        while (p_ < s_.size() && s_[p_] != '\n') ++p_;
        if (p_ < s_.size()) {
            ++p_;
            ++line_;
            line_start_ = p_;
        }
    }
    // To the first character of the next line with content; sets indent_ and eof_.
    void advance() {
        for (;;) {
            skip_spaces();
            if (p_ >= s_.size()) {
                eof_ = true;
                return;
            }
            if (s_[p_] == '\n' || s_[p_] == '#') {
                while (p_ < s_.size() && s_[p_] != '\n') ++p_;
                if (p_ < s_.size()) {
                    ++p_;
                    ++line_;
                    line_start_ = p_;
                }
                continue;
            }
            indent_ = col();
            return;
        }
    }

    // --- tree ---
    uint32_t add(Kind k, int line, int column) {
        t_.nodes.push_back(Rec{k, line, column, 0, 0, {}});
        return static_cast<uint32_t>(t_.nodes.size() - 1);
    }
    uint32_t null_at(int line, int column) { return add(Kind::null, line, column); }
    void close(uint32_t node, size_t mark, uint32_t count) {
        Rec& r = t_.nodes[node];
        r.first = static_cast<uint32_t>(t_.kids.size());
        r.count = count;
        t_.kids.insert(t_.kids.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
    }

    // --- block context ---
    bool dash_here() const { return s_[p_] == '-' && ws(p_ + 1); }

    // Is the text at the cursor "KEY:" followed by a space or the end of the line?
    bool key_here() const {
        size_t q = p_;
        const char c = s_[q];
        if (c == '"' || c == '\'') {
            ++q;
            while (q < s_.size() && s_[q] != '\n') {
                if (s_[q] == c) {
                    if (c == '\'' && q + 1 < s_.size() && s_[q + 1] == '\'') {
                        q += 2;
                        continue;
                    }
                    if (c == '"' && s_[q - 1] == '\\') {
                        ++q;
                        continue;
                    }
                    break;
                }
                ++q;
            }
            if (q >= s_.size() || s_[q] != c) return false;
            ++q;
            while (q < s_.size() && s_[q] == ' ') ++q;
            return q < s_.size() && s_[q] == ':' && ws(q + 1);
        }
        if (c == '[' || c == '{' || c == '#') return false;
        for (; q < s_.size() && s_[q] != '\n'; ++q) {
            if (s_[q] == ':' && ws(q + 1)) return true;
            if (s_[q] == '#' && s_[q - 1] == ' ') return false;
        }
        return false;
    }

    // A block node starting at the cursor (start of its content).
    uint32_t node_here() {
        if (dash_here()) return block_seq();
        if (key_here()) return block_map();
        return line_value(indent_ - 1);
    }

    // A value that ends with its line (a scalar may continue on lines indented past `parent`).
    uint32_t line_value(int parent) {
        const uint32_t v = inline_value(false, parent);
        line_end();
        advance();
        return v;
    }

    bool doc_marker() const { return marker("---") || marker("..."); }
    // The next content line is indented past `ind`: a nested block node.
    bool nested_below(int ind) const { return !eof_ && indent_ > ind && !doc_marker(); }
    // The block at indentation `ind` is over.
    bool block_over(int ind) const { return eof_ || doc_marker() || indent_ < ind; }

    uint32_t block_map() {
        const int ind = col();
        const uint32_t m = add(Kind::map, line_, ind);
        const size_t mark = stack_.size();
        uint32_t pairs = 0;
        for (;;) {
            if (!key_here()) throw Unsupported{};
            const uint32_t k = scalar(false);
            skip_spaces();
            if (s_[p_] != ':') throw Unsupported{};
            ++p_;
            skip_spaces();
            uint32_t v;
            if (!at_eol()) {
                if (dash_here() || key_here()) throw Unsupported{};  // "a: - b", "a: b: c"
                v = line_value(ind);
            } else {
                const int vl = line_, vc = col();
                line_end();
                advance();
                if (nested_below(ind))
                    v = node_here();
                else if (!eof_ && indent_ == ind && dash_here())
                    v = block_seq();
                else
                    v = null_at(vl, vc);
            }
            stack_.push_back(k);
            stack_.push_back(v);
            ++pairs;
            if (block_over(ind)) break;
            if (indent_ > ind) throw Unsupported{};  // a continuation line, or an error
            if (dash_here()) break;                  // the parent sequence's next item? not here
        }
        close(m, mark, pairs);
        return m;
    }

    uint32_t block_seq() {
        const int ind = col();
        const uint32_t q = add(Kind::sequence, line_, ind);
        const size_t mark = stack_.size();
        uint32_t n = 0;
        for (;;) {
            const int dl = line_, dc = col();
            ++p_;  // '-'
            skip_spaces();
            uint32_t item;
            if (at_eol()) {
                line_end();
                advance();
                if (nested_below(ind))
                    item = node_here();
                else
                    item = null_at(dl, dc + 1);
            } else if (dash_here()) {
                item = block_seq();
            } else if (key_here()) {
                item = block_map();
            } else {
                item = line_value(ind);
            }
            stack_.push_back(item);
            ++n;
            if (block_over(ind)) break;
            if (indent_ == ind && dash_here()) continue;
            if (indent_ == ind) break;  // a sibling key of the mapping that holds this sequence
            throw Unsupported{};
        }
        close(q, mark, n);
        return q;
    }

    // --- values on one line (and flow collections, which may span lines) ---
    // `parent` is the indentation a continuation line must exceed (block context).
    uint32_t inline_value(bool flow, int parent = -1) {
        const char c = s_[p_];
        if (c == '[') return flow_seq();
        if (c == '{') return flow_map();
        return scalar(flow, parent);
    }

    // A line break inside a scalar: folded into a space, or kept for each empty line. The
    // cursor is on the '\n'; returns false (cursor unmoved) when the next content line is not
    // indented past `parent` or is a comment, i.e. the scalar ends here.
    bool fold(std::string& v, int parent, bool quoted) {
        size_t q = p_;
        int lines = 0, breaks = 0;
        size_t ls = line_start_;
        for (;;) {
            if (q >= s_.size()) return false;
            if (s_[q] != '\n') break;
            ++q;
            ++lines;
            ls = q;
            while (q < s_.size() && s_[q] == ' ') ++q;
            if (q < s_.size() && s_[q] == '\n') ++breaks;
        }
        const int ind = static_cast<int>(q - ls);
        if (ind <= parent || s_[q] == '#') {
            if (quoted) throw Unsupported{};
            return false;
        }
        if (!quoted && s_.compare(q, 3, "---") == 0) return false;
        while (!v.empty() && v.back() == ' ' && !quoted) v.pop_back();
        if (breaks)
            v.append(static_cast<size_t>(breaks), '\n');
        else
            v += ' ';
        p_ = q;
        line_ += lines;
        line_start_ = ls;
        return true;
    }

    void flow_space() {
        for (;;) {
            skip_spaces();
            if (p_ >= s_.size()) throw Unsupported{};  // unterminated
            if (s_[p_] == '\n' || (s_[p_] == '#' && s_[p_ - 1] == ' ')) {
                while (p_ < s_.size() && s_[p_] != '\n') ++p_;
                if (p_ >= s_.size()) throw Unsupported{};
                ++p_;
                ++line_;
                line_start_ = p_;
                continue;
            }
            return;
        }
    }

    // After a flow item: a comma (then the next item, or the bracket of a trailing comma), or
    // the closing bracket.
    void flow_separator(char closing) {
        if (s_[p_] == ',') {
            ++p_;
            flow_space();
        } else if (s_[p_] != closing) {
            throw Unsupported{};
        }
    }

    uint32_t flow_seq() {
        const uint32_t q = add(Kind::sequence, line_, col());
        const size_t mark = stack_.size();
        uint32_t n = 0;
        ++p_;
        flow_space();
        while (s_[p_] != ']') {
            const uint32_t item = inline_value(true);
            flow_space();
            if (s_[p_] == ':') throw Unsupported{};  // a single-pair mapping in a sequence
            stack_.push_back(item);
            ++n;
            flow_separator(']');
        }
        ++p_;
        close(q, mark, n);
        return q;
    }

    uint32_t flow_map() {
        const uint32_t m = add(Kind::map, line_, col());
        const size_t mark = stack_.size();
        uint32_t pairs = 0;
        ++p_;
        flow_space();
        while (s_[p_] != '}') {
            if (s_[p_] == '[' || s_[p_] == '{') throw Unsupported{};  // complex keys
            const uint32_t k = scalar(true);
            flow_space();
            if (s_[p_] != ':') throw Unsupported{};
            const int vl = line_, vc = col();
            ++p_;
            flow_space();
            const uint32_t v = (s_[p_] == ',' || s_[p_] == '}') ? null_at(vl, vc) : inline_value(true);
            flow_space();
            stack_.push_back(k);
            stack_.push_back(v);
            ++pairs;
            flow_separator('}');
        }
        ++p_;
        close(m, mark, pairs);
        return m;
    }

    static void utf8(std::string& o, uint32_t cp) {
        if (cp < 0x80) {
            o += static_cast<char>(cp);
        } else if (cp < 0x800) {
            o += static_cast<char>(0xC0 | (cp >> 6));
            o += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            o += static_cast<char>(0xE0 | (cp >> 12));
            o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            o += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            o += static_cast<char>(0xF0 | (cp >> 18));
            o += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            o += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    uint32_t hex(size_t digits) {
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i, ++p_) {
            if (p_ >= s_.size()) throw Unsupported{};
            const char h = s_[p_];
            v <<= 4;
            if (h >= '0' && h <= '9')
                v |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
                v |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
                v |= static_cast<uint32_t>(h - 'A' + 10);
            else
                throw Unsupported{};
        }
        return v;
    }

    // A scalar on this line: quoted, or plain up to its end in this context.
    uint32_t scalar(bool flow, int parent = -1) {
        const int l = line_, c0 = col();
        std::string v;
        if (s_[p_] == '\'')
            single_quoted(v, flow, parent);
        else if (s_[p_] == '"')
            double_quoted(v, flow, parent);
        else if (plain(v, flow, parent))
            return null_at(l, c0);
        const uint32_t n = add(Kind::scalar, l, c0);
        t_.nodes[n].scalar = std::move(v);
        return n;
    }

    // 'text', '' for a quote; a line break folds (block context only).
    void single_quoted(std::string& v, bool flow, int parent) {
        for (++p_;; ++p_) {
            if (p_ >= s_.size()) throw Unsupported{};
            if (s_[p_] == '\n') {
                while (!v.empty() && v.back() == ' ') v.pop_back();
                if (flow || !fold(v, parent, true)) throw Unsupported{};
                --p_;
                continue;
            }
            if (s_[p_] == '\'') {
                if (p_ + 1 < s_.size() && s_[p_ + 1] == '\'') {
                    v += '\'';
                    ++p_;
                    continue;
                }
                ++p_;
                return;
            }
            v += s_[p_];
        }
    }

    // "text" with YAML's escapes; a line break folds (block context only).
    void double_quoted(std::string& v, bool flow, int parent) {
        size_t escaped = 0;  // v up to here came from escapes: no trimming into it
        for (++p_;;) {
            if (p_ >= s_.size()) throw Unsupported{};
            if (s_[p_] == '\n') {
                while (v.size() > escaped && v.back() == ' ') v.pop_back();
                if (flow || !fold(v, parent, true)) throw Unsupported{};
                continue;
            }
            const char x = s_[p_++];
            if (x == '"') return;
            if (x != '\\') {
                v += x;
                continue;
            }
            escape(v, parent);
            escaped = v.size();
        }
    }

    // The escape after a backslash (YAML 1.2, 5.7).
    void escape(std::string& v, int parent) {
        static constexpr std::pair<char, char> kSimple[] = {
            {'\\', '\\'}, {'"', '"'},  {'/', '/'},    {'n', '\n'}, {'t', '\t'}, {'r', '\r'}, {'0', '\0'},
            {'a', '\a'},  {'b', '\b'}, {'e', '\x1b'}, {'f', '\f'}, {'v', '\v'}, {' ', ' '}};
        if (p_ >= s_.size()) throw Unsupported{};
        const char e = s_[p_++];
        for (const auto& [from, to] : kSimple)
            if (e == from) {
                v += to;
                return;
            }
        switch (e) {
            case '\n': {  // an escaped line break: joined without a space
                --p_;
                const size_t before = v.size();
                if (!fold(v, parent, true)) throw Unsupported{};
                v.resize(before);
                return;
            }
            case 'x':
                return utf8(v, hex(2));
            case 'u':
                return utf8(v, hex(4));
            case 'U':
                return utf8(v, hex(8));
            default:
                throw Unsupported{};
        }
    }

    // A plain scalar up to its end in this context, with its continuation lines (block context);
    // true when it is a null (~, null).
    bool plain(std::string& v, bool flow, int parent) {
        // Indicators that start something else are the full parser's business.
        const char c = s_[p_];
        if (c == '&' || c == '*' || c == '!' || c == '|' || c == '>' || c == '%' || c == '@' || c == '`' || c == '?' ||
            c == ':' || c == ',' || c == ']' || c == '}' || c == '#' || (c == '-' && ws(p_ + 1)))
            throw Unsupported{};
        const size_t b = p_;
        size_t e = p_;
        for (; p_ < s_.size() && s_[p_] != '\n'; ++p_) {
            const char x = s_[p_];
            if (x == ':' && (ws(p_ + 1) || (flow && (s_[p_ + 1] == ',' || s_[p_ + 1] == '}' || s_[p_ + 1] == ']'))))
                break;
            if (x == '#' && s_[p_ - 1] == ' ') break;
            if (flow && (x == ',' || x == '[' || x == ']' || x == '{' || x == '}')) break;
            if (x != ' ') e = p_ + 1;
        }
        p_ = e;  // trailing spaces are not part of it
        v.assign(s_.substr(b, e - b));
        // Continuation lines (block context only; a flow scalar ends at the line).
        while (!flow && parent >= 0 && p_ < s_.size()) {
            size_t q = p_;
            while (q < s_.size() && s_[q] == ' ') ++q;
            if (q >= s_.size() || s_[q] != '\n') break;  // a comment follows
            p_ = q;
            if (!fold(v, parent, false)) break;
            if (key_here() || dash_here() || s_[p_] == '#') throw Unsupported{};
            size_t b2 = p_, e2 = p_;
            for (; p_ < s_.size() && s_[p_] != '\n'; ++p_) {
                const char x = s_[p_];
                if (x == ':' && ws(p_ + 1)) throw Unsupported{};
                if (x == '#' && s_[p_ - 1] == ' ') break;
                if (x != ' ') e2 = p_ + 1;
            }
            v.append(s_.substr(b2, e2 - b2));
            p_ = e2;
        }
        return v == "~" || v == "null" || v == "Null" || v == "NULL";
    }

    std::string_view s_;
    Tree& t_;
    size_t p_ = 0, line_start_ = 0;
    int line_ = 0, indent_ = 0;
    bool eof_ = false;
    std::vector<uint32_t> stack_;
};

// yaml-cpp's tree → ours, for what the scanner leaves to it.
uint32_t copy(const YAML::Node& n, Tree& t) {
    const YAML::Mark m = n.Mark();
    Rec r{Kind::null, m.is_null() ? -1 : m.line, m.is_null() ? -1 : m.column, 0, 0, {}};
    std::vector<uint32_t> kids;
    switch (n.Type()) {
        case YAML::NodeType::Scalar:
            r.kind = Kind::scalar;
            r.scalar = n.Scalar();
            break;
        case YAML::NodeType::Sequence:
            r.kind = Kind::sequence;
            for (const auto& c : n) kids.push_back(copy(c, t));
            r.count = static_cast<uint32_t>(kids.size());
            break;
        case YAML::NodeType::Map:
            r.kind = Kind::map;
            for (const auto& kv : n) {
                kids.push_back(copy(kv.first, t));
                kids.push_back(copy(kv.second, t));
            }
            r.count = static_cast<uint32_t>(kids.size() / 2);
            break;
        default:
            break;
    }
    r.first = static_cast<uint32_t>(t.kids.size());
    t.kids.insert(t.kids.end(), kids.begin(), kids.end());
    t.nodes.push_back(std::move(r));
    return static_cast<uint32_t>(t.nodes.size() - 1);
}

}  // namespace

bool scan_fast(std::string_view text, Tree& out) {
    out = Tree{};
    // Roughly one node per 8 bytes of config text: no reallocation (and string moves) on the way.
    out.nodes.reserve(text.size() / 8 + 16);
    out.kids.reserve(text.size() / 8 + 16);
    try {
        Scanner(text, out).stream();
        return true;
    } catch (const Unsupported&) {
        out = Tree{};
        return false;
    }
}

namespace {

// yaml-cpp 0.7's LoadAll never returns on some malformed streams (a token no rule consumes, such as
// a stray ',' at the top level): HandleNextDocument reports one more null document at the same
// place, forever, and memory grows until the process dies (jbeder/yaml-cpp#1319, fixed after 0.8).
// Found by fuzz_config. Walk the documents first with a handler that only notes where each one
// starts; a document that starts where the previous one did means the parser stopped moving, and
// the stream is rejected at that place.
class ProgressGuard final : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark&) override { first_ = true; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
    void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { note(m); }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
        note(m);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
        note(m);
    }
    void OnMapEnd() override {}

    // Where the current document starts; -1 before its first node.
    int start() const { return start_; }
    YAML::Mark mark() const { return mark_; }

private:
    void note(const YAML::Mark& m) {
        if (!first_) return;
        first_ = false;
        start_ = m.pos;
        mark_ = m;
    }
    bool first_ = false;
    int start_ = -1;
    YAML::Mark mark_ = YAML::Mark::null_mark();
};

void check_progress(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    ProgressGuard guard;
    int previous = -1;
    while (parser.HandleNextDocument(guard)) {
        if (guard.start() >= 0 && guard.start() == previous)
            throw YAML::ParserException(guard.mark(), "unexpected token (the document does not parse)");
        previous = guard.start();
    }
}

}  // namespace

Stream Stream::parse(std::string_view text) {
    Stream s;
    s.tree_ = std::make_unique<Tree>();
    if (scan_fast(text, *s.tree_)) return s;
    s.fallback_ = true;
    try {
        const std::string copy_of_text(text);
        check_progress(copy_of_text);
        for (const YAML::Node& d : YAML::LoadAll(copy_of_text)) s.tree_->roots.push_back(copy(d, *s.tree_));
    } catch (const YAML::Exception& e) {
        throw ParseError(e.mark.is_null() ? Pos{} : Pos{e.mark.line, e.mark.column}, e.msg);
    }
    return s;
}

std::vector<Node> Stream::documents() const {
    std::vector<Node> d;
    for (uint32_t r : tree_->roots) d.emplace_back(tree_.get(), r);
    return d;
}

}  // namespace svcgate::ctl::ytree
