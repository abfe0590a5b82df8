#include "control/kube/api_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "control/base/address.h"
#include "control/kube/json_tree.h"

namespace svcgate::ctl::kube {

namespace {

constexpr size_t kMaxBody = 512u << 20;

// The CA bundle holds at least one certificate.
bool has_certificate(const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (!bio) return false;
    X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (!x) return false;
    X509_free(x);
    return true;
}

// A Status body's message ("services is forbidden: ..."), or the body's start.
std::string message_of(const std::string& body) {
    std::string why;
    const nlohmann::json j = parse_bounded(body.substr(0, 1u << 20), why);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
    return body.substr(0, 200);
}

std::string env(const char* upper, const char* lower) {
    const char* v = std::getenv(upper);
    if (!v || !*v) v = std::getenv(lower);
    return v ? v : "";
}

bool loopback(const IpAddr& a) {
    if (a.is_v4()) return (rte_be_to_cpu_32(a.v4().be) >> 24) == 127;
    Ip6 one{};
    one.b[15] = 1;
    return a.v6() == one;
}

// Go's httpproxy: NO_PROXY entries are hosts (a suffix match at a dot boundary; a leading '.'
// or "*." the same), host:port, IP addresses or CIDRs; "*" alone matches everything.
bool no_proxy_matches(const std::string& list, const std::string& host, int port) {
    const auto ip = parse_ip(host);
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        std::string e = list.substr(pos, end - pos);
        pos = end + 1;
        while (!e.empty() && e.front() == ' ') e.erase(0, 1);
        while (!e.empty() && e.back() == ' ') e.pop_back();
        if (e.empty()) continue;
        if (e == "*") return true;
        if (ip) {
            if (const auto c = parse_cidr(e); c && c->contains(*ip)) return true;
            if (const auto a = parse_ip(e); a && *a == *ip) return true;
            continue;
        }
        if (const size_t colon = e.rfind(':');
            colon != std::string::npos && e.find(']') == std::string::npos && e.find(':') == colon) {
            if (e.substr(colon + 1) != std::to_string(port)) continue;
            e = e.substr(0, colon);
        }
        if (e.starts_with("*.")) e = e.substr(1);
        std::string h = host;
        for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (e.front() == '.') {
            if (h.ends_with(e) || h == e.substr(1)) return true;
        } else if (h == e || h.ends_with("." + e)) {
            return true;
        }
    }
    return false;
}

// The server is verified by its subjectAltNames only: curl's own check would fall back to the
// CN, which Go (kubectl) ignores, so OpenSSL checks the name during the handshake instead.
CURLcode ssl_ctx_setup(CURL*, void* ssl_ctx, void* arg) {
    const std::string& name = *static_cast<const std::string*>(arg);
    X509_VERIFY_PARAM* p = SSL_CTX_get0_param(static_cast<SSL_CTX*>(ssl_ctx));
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    const bool ok = parse_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(p, name.c_str()) == 1
                                   : X509_VERIFY_PARAM_set1_host(p, name.c_str(), name.size()) == 1;
    return ok ? CURLE_OK : CURLE_SSL_CERTPROBLEM;
}

// Keepalive with a bound curl 7.88 cannot set itself (TCP_KEEPCNT), and TCP_USER_TIMEOUT: data
// unacknowledged for 30 s ends the connection.
int socket_options(void*, curl_socket_t fd, curlsocktype) {
    const int on = 1, idle = 15, interval = 5, count = 3, user_timeout_ms = 30000;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
    return CURL_SOCKOPT_OK;
}

struct Transfer {
    HttpResult& r;
    const std::function<bool(std::string_view)>* on_line;
    const std::atomic<bool>& stopped;
    std::string line;
    bool cut = false;  // on_line ended it, or a line grew too long
};

size_t on_header(char* data, size_t size, size_t n, void* arg) {
    auto& t = *static_cast<Transfer*>(arg);
    const std::string_view h(data, size * n);
    if (h.starts_with("HTTP/")) {  // a new answer: the last one (after a proxy's CONNECT) counts
        t.r.retry_after = 0;
        const size_t sp = h.find(' ');
        const auto code =
            sp == std::string_view::npos ? std::nullopt : parse_number(std::string(h.substr(sp + 1, 3)), 100, 999);
        t.r.status = code ? static_cast<int>(*code) : 0;
    }
    constexpr std::string_view kRetry = "retry-after:";
    if (h.size() > kRetry.size() && strncasecmp(h.data(), kRetry.data(), kRetry.size()) == 0) {
        std::string v = std::string(h.substr(kRetry.size()));
        std::erase_if(v, [](char ch) { return ch == ' ' || ch == '\r' || ch == '\n' || ch == '\t'; });
        const auto secs = parse_number(v, 0, 86400);  // an HTTP-date is taken as none
        t.r.retry_after = secs ? static_cast<int>(*secs) : 0;
    }
    return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* arg) {
    auto& t = *static_cast<Transfer*>(arg);
    const size_t len = size * n;
    if (t.stopped) return 0;
    if (!t.on_line || t.r.status != 200) {
        if (t.r.body.size() + len > kMaxBody) return 0;
        t.r.body.append(data, len);
        return len;
    }
    for (size_t i = 0; i < len;) {
        const char* nl = static_cast<const char*>(memchr(data + i, '\n', len - i));
        const size_t end = nl ? static_cast<size_t>(nl - data) : len;
        t.line.append(data + i, end - i);
        if (t.line.size() > kMaxEventBytes) {
            t.r.transport = Status::fail(kEventTooLong);
            t.cut = true;
            return 0;
        }
        i = end;
        if (nl) {
            ++i;
            if (!t.line.empty() && !(*t.on_line)(t.line)) {
                t.cut = true;
                return 0;
            }
            t.line.clear();
        }
    }
    return len;
}

int on_progress(void* arg, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Transfer*>(arg)->stopped ? 1 : 0;
}

}  // namespace

std::string proxy_for(const ApiServer& s) {
    if (!s.proxy_url.empty()) return s.proxy_url;
    const std::string proxy = env("HTTPS_PROXY", "https_proxy");
    if (proxy.empty()) return {};
    if (s.host == "localhost") return {};
    if (const auto ip = parse_ip(s.host); ip && loopback(*ip)) return {};
    if (no_proxy_matches(env("NO_PROXY", "no_proxy"), s.host, s.port)) return {};
    return proxy;
}

ApiClient::ApiClient(const ApiServer& server, Credentials& creds)
    : server_(server), creds_(creds), proxy_(proxy_for(server)) {
    static const bool global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    if (!global) {
        setup_error_ = "libcurl did not initialise";
    } else if (!has_certificate(server.ca_pem)) {
        setup_error_ = "the CA is not PEM certificates";
    } else if (!(curl_ = curl_easy_init())) {
        setup_error_ = "libcurl: no handle";
    }
}

ApiClient::~ApiClient() {
    if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

HttpResult ApiClient::get(const std::string& path, int timeout_s) { return request(path, timeout_s, nullptr); }

HttpResult ApiClient::send(const char* method, const std::string& path, const std::string& body,
                           const std::string& content_type, int timeout_s) {
    const Write w{method, body, content_type};
    return request(path, timeout_s, nullptr, &w);
}

HttpResult ApiClient::stream(const std::string& path, int idle_s,
                             const std::function<bool(std::string_view)>& on_line) {
    return request(path, idle_s, &on_line);
}

namespace {

// Trust: the kubeconfig's CA alone, the name checked by ssl_ctx_setup; the client certificate.
void set_tls(CURL* c, const std::string& ca_pem, const std::string& name, const ClientCert& cert) {
    // CAINFO and CAPATH unset, so that neither the build's default bundle nor OpenSSL's default
    // paths ($SSL_CERT_FILE) are read.
    curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    curl_easy_setopt(c, CURLOPT_CAINFO, nullptr);
    curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);  // ssl_ctx_setup checks the SANs instead
    curl_easy_setopt(c, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_setup);
    curl_easy_setopt(c, CURLOPT_SSL_CTX_DATA, &name);
    if (!cert.cert_pem.empty()) {  // a PEM blob: the whole chain is sent
        curl_blob cb{const_cast<char*>(cert.cert_pem.data()), cert.cert_pem.size(), CURL_BLOB_COPY};
        curl_blob kb{const_cast<char*>(cert.key_pem.data()), cert.key_pem.size(), CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cb);
        curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &kb);
        curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
}

// What a failed transfer says, in the kubeconfig's terms.
std::string transfer_error(CURLcode rc, int timeout_s, bool streaming) {
    switch (rc) {
        case CURLE_OPERATION_TIMEDOUT:
            return streaming ? fmt::format("no data for {} s", timeout_s)
                             : fmt::format("no answer within {} s", timeout_s);
        case CURLE_PEER_FAILED_VERIFICATION:
            return "the server's certificate does not verify against the kubeconfig's CA and name";
        case CURLE_SSL_CONNECT_ERROR:
            return "TLS handshake failed: the server's certificate does not verify against the kubeconfig's CA and "
                   "name, or the client certificate was refused";
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
            return "the connection was cut";
        case CURLE_ABORTED_BY_CALLBACK:
            return "stopped";
        default:
            return curl_easy_strerror(rc);
    }
}

}  // namespace

HttpResult ApiClient::request(const std::string& path, int timeout_s,
                              const std::function<bool(std::string_view)>* on_line, const Write* write) {
    HttpResult r;
    auto unsent = [&r](Status why) {
        r.transport = std::move(why);
        return r;
    };
    if (!curl_) return unsent(Status::fail(setup_error_));
    if (stopped_) return unsent(Status::fail("stopped"));
    CURL* c = static_cast<CURL*>(curl_);
    curl_easy_reset(c);  // the connection cache stays
    const ClientCert cert = creds_.client_cert();
    if (!cert.read.ok()) return unsent(cert.read);
    // tls-server-name: the name asked for (SNI) and verified; the connection goes to the server.
    const std::string& name = server_.tls_server_name.empty() ? server_.host : server_.tls_server_name;
    const std::string url_host = name.find(':') != std::string::npos ? "[" + name + "]" : name;
    const std::string url = fmt::format("https://{}:{}{}{}", url_host, server_.port, server_.path_prefix, path);
    std::string connect_to;
    curl_slist* connect = nullptr;
    if (!server_.tls_server_name.empty()) {
        const std::string real = server_.host.find(':') != std::string::npos ? "[" + server_.host + "]" : server_.host;
        connect_to = fmt::format("{}:{}:{}:{}", url_host, server_.port, real, server_.port);
        connect = curl_slist_append(nullptr, connect_to.c_str());
        curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect);
    }
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    set_tls(c, server_.ca_pem, name, cert);
    curl_easy_setopt(c, CURLOPT_PROXY, proxy_.c_str());  // "" = none, not curl's own reading of the environment
    curl_easy_setopt(c, CURLOPT_NOPROXY, "");
    curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, socket_options);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    if (on_line) {  // silence, not length, bounds a stream
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(timeout_s));
    } else {
        curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(timeout_s));
    }
    curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
    if (const std::string t = creds_.bearer(); !t.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + t).c_str());
    if (write) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, write->method);
        if (!write->content_type.empty()) {
            headers = curl_slist_append(headers, ("Content-Type: " + write->content_type).c_str());
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, write->body.data());
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(write->body.size()));
        }
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "svcgate");
    Transfer t{r, on_line, stopped_, {}, false};
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    const CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    r.status = static_cast<int>(code);
    curl_slist_free_all(headers);
    if (connect) curl_slist_free_all(connect);
    if (rc != CURLE_OK && !t.cut && r.transport.ok())
        r.transport = Status::fail(transfer_error(rc, timeout_s, on_line != nullptr));
    // Whatever the transport said: the body ended inside a line.
    if (on_line && r.status == 200 && !t.line.empty() && !t.cut && !stopped_)
        r.transport = Status::fail(kCutInsideEvent);
    if (r.status == 401) creds_.invalidate();
    const bool ok = write ? r.status >= 200 && r.status < 300 : r.status == 200;
    if (!ok && r.status != 0 && r.transport.ok())
        r.transport = Status::fail(fmt::format("HTTP {}: {}", r.status, message_of(r.body)));
    return r;
}

void ApiClient::stop() { stopped_ = true; }  // on_progress aborts the transfer

std::string query_escape(std::string_view s) {
    std::string out;
    for (const char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~')
            out += c;
        else
            out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
    return out;
}

}  // namespace svcgate::ctl::kube
