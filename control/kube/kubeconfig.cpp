#include "control/kube/kubeconfig.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "control/base/address.h"
#include "control/base/file.h"
#include "control/config/config_model.h"
#include "control/config/yaml_tree.h"

namespace svcgate::ctl::kube {

namespace {

// Whatever is wrong with a kubeconfig is a config error (CONTRIBUTING.md): one issue, placed by
// `where` (the file, its context, the server) as the message has always been.
[[noreturn]] void refuse(const std::string& where, const std::string& what) {
    throw ConfigError({ConfigIssue{Mark{where}, {}, what}});
}

std::string read_or_throw(const std::string& path, const std::string& what) {
    auto text = read_file(path);
    if (!text) refuse(what, fmt::format("cannot read \"{}\"", path));
    return std::move(*text);
}

std::string base64(const std::string& text, const std::string& what) {
    std::string out(text.size(), '\0');
    size_t n = 0;
    if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(), " \n\r\t",
                          &n, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
        refuse(what, "not base64");
    out.resize(n);
    return out;
}

std::string scalar(const ytree::Node& n, const char* key) {
    const ytree::Node v = n[key];
    return v && v.IsScalar() ? v.Scalar() : std::string();
}

// The entry of kubeconfig list `list` (clusters, users, contexts) named `name`: its `field` map.
ytree::Node named(const ytree::Node& root, const char* list, const char* field, const std::string& name,
                  const std::string& where) {
    const ytree::Node l = root[list];
    if (l && l.IsSequence())
        for (size_t i = 0; i < l.size(); ++i)
            if (scalar(l[i], "name") == name) {
                const ytree::Node f = l[i][field];
                if (!f || !f.IsMap()) break;
                return f;
            }
    refuse(where, fmt::format("no {} \"{}\"", list, name));
}

// A file or its inline -data form.
std::string file_or_data(const ytree::Node& n, const char* file_key, const std::string& data_key,
                         const std::string& dir, const std::string& where) {
    if (const std::string d = scalar(n, data_key.c_str()); !d.empty()) return base64(d, where + ": " + data_key);
    std::string f = scalar(n, file_key);
    if (f.empty()) return {};
    if (f[0] != '/') f = dir + f;
    return read_or_throw(f, where + ": " + file_key);
}

}  // namespace

void split_server(const std::string& server, std::string& host, int& port, std::string& prefix) {
    if (!server.starts_with("https://"))
        refuse(fmt::format("server \"{}\"", server), "only https:// is followed (TLS is always verified)");
    std::string rest = server.substr(8);
    const size_t slash = rest.find('/');
    prefix = slash == std::string::npos ? "" : rest.substr(slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    if (prefix.find_first_of("?#") != std::string::npos)
        refuse(fmt::format("server \"{}\"", server), "a query or fragment is not a server");
    rest = rest.substr(0, slash);
    port = 443;
    size_t colon = std::string::npos;
    if (!rest.empty() && rest[0] == '[') {
        const size_t end = rest.find(']');
        if (end == std::string::npos) refuse(fmt::format("server \"{}\"", server), "no ']'");
        host = rest.substr(1, end - 1);
        if (end + 1 < rest.size() && rest[end + 1] == ':') colon = end + 1;
    } else {
        colon = rest.rfind(':');
        host = rest.substr(0, colon);
    }
    if (colon != std::string::npos) {
        const std::string p = rest.substr(colon + 1);
        const auto v = parse_number(p, 1, 65535);
        if (!v) refuse(fmt::format("server \"{}\"", server), fmt::format("bad port \"{}\"", p));
        port = static_cast<int>(*v);
    }
    if (host.empty()) refuse(fmt::format("server \"{}\"", server), "no host");
}

ApiServer load_kubeconfig(const std::string& path, const std::string& context) {
    const std::string text = read_or_throw(path, "kubeconfig");
    const std::string dir = path.find('/') == std::string::npos ? "" : path.substr(0, path.rfind('/') + 1);
    ytree::Stream stream;
    try {
        stream = ytree::Stream::parse(text);
    } catch (const ytree::ParseError& e) {
        refuse(fmt::format("kubeconfig {}:{}", path, e.mark.line + 1), e.msg);
    }
    const auto docs = stream.documents();
    if (docs.empty() || !docs[0].IsMap()) refuse("kubeconfig " + path, "not a map");
    const ytree::Node root = docs[0];
    const std::string ctx_name = context.empty() ? scalar(root, "current-context") : context;
    if (ctx_name.empty()) refuse("kubeconfig " + path, "no current-context");
    const std::string where = fmt::format("kubeconfig {}, context {}", path, ctx_name);
    const ytree::Node ctx = named(root, "contexts", "context", ctx_name, fmt::format("kubeconfig {}", path));
    const ytree::Node cluster = named(root, "clusters", "cluster", scalar(ctx, "cluster"), where);
    ApiServer s;
    s.source = where;
    s.server = scalar(cluster, "server");
    split_server(s.server, s.host, s.port, s.path_prefix);
    s.tls_server_name = scalar(cluster, "tls-server-name");
    s.proxy_url = scalar(cluster, "proxy-url");
    if (scalar(cluster, "insecure-skip-tls-verify") == "true")
        refuse(where, "insecure-skip-tls-verify is refused (TLS is always verified)");
    s.ca_pem = file_or_data(cluster, "certificate-authority", "certificate-authority-data", dir, where);
    if (s.ca_pem.empty()) refuse(where, "the cluster has no certificate-authority(-data) to verify it with");
    if (const std::string u = scalar(ctx, "user"); !u.empty()) {
        const ytree::Node user = named(root, "users", "user", u, where);
        s.cert_pem = file_or_data(user, "client-certificate", "client-certificate-data", dir, where);
        s.key_pem = file_or_data(user, "client-key", "client-key-data", dir, where);
        if (s.cert_pem.empty() != s.key_pem.empty())
            refuse(where, "a client certificate needs its key, and a key its certificate");
        auto path_of = [&](const char* key) {  // a file is read again on change (Credentials)
            std::string f = scalar(user, key);
            return f.empty() || f[0] == '/' ? f : dir + f;
        };
        if (scalar(user, "client-certificate-data").empty()) s.cert_file = path_of("client-certificate");
        if (scalar(user, "client-key-data").empty()) s.key_file = path_of("client-key");
        s.token = scalar(user, "token");
        s.token_file = scalar(user, "tokenFile");
        if (!s.token_file.empty() && s.token_file[0] != '/') s.token_file = dir + s.token_file;
        if (const ytree::Node e = user["exec"]; e && e.IsMap()) {
            s.exec.command = scalar(e, "command");
            if (s.exec.command.empty()) refuse(where, "exec needs a command");
            if (s.exec.command.find('/') != std::string::npos && s.exec.command[0] != '/')
                s.exec.command = dir + s.exec.command;
            if (const std::string v = scalar(e, "apiVersion"); !v.empty()) s.exec.api_version = v;
            if (const ytree::Node a = e["args"]; a && a.IsSequence())
                for (size_t i = 0; i < a.size(); ++i) s.exec.args.push_back(a[i].Scalar());
            if (const ytree::Node env = e["env"]; env && env.IsSequence())
                for (size_t i = 0; i < env.size(); ++i)
                    s.exec.env.emplace_back(scalar(env[i], "name"), scalar(env[i], "value"));
        }
    }
    return s;
}

ApiServer in_cluster(const std::string& root) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        refuse("in-cluster", "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
    ApiServer s;
    const std::string h(host);
    s.server = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, port);
    split_server(s.server, s.host, s.port, s.path_prefix);
    s.ca_pem = read_or_throw(root + "/ca.crt", "in-cluster CA");
    s.token_file = root + "/token";
    s.source = "in-cluster (" + root + ")";
    return s;
}

double parse_rfc3339(const std::string& s) {
    std::tm tm{};
    const char* p = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p) return -1;
    double frac = 0;
    if (*p == '.')
        for (double scale = 0.1; *++p >= '0' && *p <= '9'; scale /= 10) frac += (*p - '0') * scale;
    long long off = 0;
    if (*p == 'Z' || *p == 'z') {
        ++p;
    } else if (*p == '+' || *p == '-') {
        int hh = 0, mm = 0;
        if (std::sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2) return -1;
        off = (hh * 3600LL + mm * 60LL) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -1;
    }
    if (*p) return -1;
    return static_cast<double>(timegm(&tm) - off) + frac;
}

std::string Credentials::bearer() {
    std::unique_lock lk(mu_);
    if (!s_.exec.command.empty()) {
        exec_cv_.wait(lk, [&] { return !exec_running_; });  // another kind's thread runs it: its answer
        const double now = static_cast<double>(std::time(nullptr));
        if (!exec_valid_ || (exec_expiry_ && now >= exec_expiry_)) {
            if (Status s = run_exec(lk); !s) {
                error_ = s.error();
                return exec_token_;  // the last one, should it still work
            }
        }
        return exec_token_;
    }
    if (!s_.token_file.empty()) {
        struct stat st {};
        if (stat(s_.token_file.c_str(), &st) != 0) {
            error_ = fmt::format("token file {}: cannot stat", s_.token_file);
            return file_token_;
        }
        if (st.st_mtim.tv_sec != file_mtime_.tv_sec || st.st_mtim.tv_nsec != file_mtime_.tv_nsec ||
            file_token_.empty()) {
            try {
                std::string t = read_or_throw(s_.token_file, "token file");
                while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
                file_token_ = std::move(t);
                file_mtime_ = st.st_mtim;
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }
        return file_token_;
    }
    return s_.token;
}

ClientCert Credentials::client_cert() {
    std::lock_guard lk(mu_);
    if (!exec_cert_.empty()) return {exec_cert_, exec_key_, {}};
    if (s_.cert_file.empty() && s_.key_file.empty()) return {s_.cert_pem, s_.key_pem, {}};
    // Either may be inline, the other a file.
    auto fresh = [](const std::string& f, std::timespec& seen) {
        struct stat st {};
        if (f.empty() || stat(f.c_str(), &st) != 0) return true;  // read (and fail) below
        const bool changed = st.st_mtim.tv_sec != seen.tv_sec || st.st_mtim.tv_nsec != seen.tv_nsec;
        seen = st.st_mtim;
        return changed;
    };
    const bool cert_changed = fresh(s_.cert_file, cert_mtime_), key_changed = fresh(s_.key_file, key_mtime_);
    if (cert_changed || key_changed || !file_cert_.read.ok()) {
        ClientCert c{s_.cert_pem, s_.key_pem, {}};
        if (!s_.cert_file.empty()) {
            auto t = read_file(s_.cert_file);
            if (!t)
                c.read = Status::fail(fmt::format("client certificate {}: cannot read it", s_.cert_file));
            else
                c.cert_pem = std::move(*t);
        }
        if (!s_.key_file.empty()) {
            auto t = read_file(s_.key_file);
            if (!t)
                c.read = Status::fail(fmt::format("client key {}: cannot read it", s_.key_file));
            else
                c.key_pem = std::move(*t);
        }
        file_cert_ = std::move(c);
        if (!file_cert_.read.ok()) error_ = file_cert_.read.error();
    }
    return file_cert_;
}

void Credentials::cancel() { cancelled_ = true; }

void Credentials::invalidate() {
    std::lock_guard lk(mu_);
    exec_valid_ = false;
    file_token_.clear();
}

std::string Credentials::error() const {
    std::lock_guard lk(mu_);
    return error_;
}

unsigned Credentials::exec_runs() const {
    std::lock_guard lk(mu_);
    return exec_runs_;
}

// Runs the plugin (with lk, on mu_, held; released while the plugin runs, so that status and the
// other kinds' threads are not held by a slow plugin) and takes its ExecCredential.
Status Credentials::run_exec(std::unique_lock<std::mutex>& lk) {
    ++exec_runs_;
    exec_running_ = true;
    lk.unlock();
    std::string text;
    const Status ran = run_plugin(text);
    lk.lock();
    exec_running_ = false;
    exec_cv_.notify_all();
    if (!ran) return ran;
    return take_credential(text);
}

// Runs the plugin as kubectl does: KUBERNETES_EXEC_INFO set, stdout an ExecCredential into `text`.
// Reads only what does not change (s_, cancelled_): called without mu_.
Status Credentials::run_plugin(std::string& text) const {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return Status::fail("exec plugin: pipe failed");
    const nlohmann::json info = {
        {"apiVersion", s_.exec.api_version}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}};
    const std::string info_text = info.dump();
    // Everything the child needs is built before fork: after it, only async-signal-safe calls.
    std::vector<std::string> envs{"KUBERNETES_EXEC_INFO=" + info_text};
    for (const auto& [k, v] : s_.exec.env) envs.push_back(k + "=" + v);
    for (char** e = environ; *e; ++e)
        if (!std::string_view(*e).starts_with("KUBERNETES_EXEC_INFO=")) envs.emplace_back(*e);
    std::vector<char*> envp;
    for (std::string& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args{s_.exec.command};  // copies: execvpe takes char* const[]
    args.insert(args.end(), s_.exec.args.begin(), s_.exec.args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t pid = fork();
    if (pid < 0) {
        close(out[0]), close(out[1]);
        if (null >= 0) close(null);
        return Status::fail("exec plugin: fork failed");
    }
    if (pid == 0) {
        dup2(out[1], 1);
        if (null >= 0) dup2(null, 0);
        execvpe(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    if (null >= 0) close(null);
    close(out[1]);
    char buf[4096];
    // Read until EOF, the output's bound, kExecTimeoutSeconds or a cancel: then it is killed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kExecTimeoutSeconds);
    bool killed = false;
    for (;;) {
        if (cancelled_ || std::chrono::steady_clock::now() >= deadline || text.size() >= (1u << 20)) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        pollfd p{out[0], POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        const ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (killed)
        return Status::fail(fmt::format(
            "exec plugin {}: {}", s_.exec.command,
            cancelled_ ? "killed: svcgate is stopping" : fmt::format("killed after {} s", kExecTimeoutSeconds)));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return Status::fail(fmt::format("exec plugin {}: exited with {}", s_.exec.command,
                                        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
    return {};
}

// The plugin's ExecCredential as the credentials to use. Called with mu_ held.
Status Credentials::take_credential(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("status") || !j["status"].is_object())
        return Status::fail(fmt::format("exec plugin {}: its output is not an ExecCredential", s_.exec.command));
    const nlohmann::json& st = j["status"];
    auto str = [&](const char* k) { return st.contains(k) && st[k].is_string() ? st[k].get<std::string>() : ""; };
    // A token, or a client certificate and its key (client.authentication.k8s.io), or both.
    const std::string cert = str("clientCertificateData"), key = str("clientKeyData");
    if (cert.empty() != key.empty())
        return Status::fail(fmt::format("exec plugin {}: clientCertificateData needs clientKeyData", s_.exec.command));
    if (str("token").empty() && cert.empty())
        return Status::fail(fmt::format(
            "exec plugin {}: its ExecCredential has no status.token or clientCertificateData", s_.exec.command));
    exec_token_ = str("token");
    exec_cert_ = cert;
    exec_key_ = key;
    exec_expiry_ = 0;
    if (st.contains("expirationTimestamp") && st["expirationTimestamp"].is_string()) {
        const double t = parse_rfc3339(st["expirationTimestamp"].get<std::string>());
        if (t < 0) return Status::fail(fmt::format("exec plugin {}: bad expirationTimestamp", s_.exec.command));
        exec_expiry_ = t;
    }
    exec_valid_ = true;
    error_.clear();
    return {};
}

}  // namespace svcgate::ctl::kube
