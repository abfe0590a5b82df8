// One HTTPS client of the API server, on libcurl (keep-alive: a LIST's pages share a connection),
// as kubectl's transport behaves (client-go's rest.Config):
//   - the server is verified against the kubeconfig's CA and nothing else (no system store, not
//     $SSL_CERT_FILE), by its subjectAltNames only (a certificate's CN is ignored, as Go does),
//     under tls-server-name when the kubeconfig gives one (also sent as SNI);
//   - the client certificate (its whole chain) and the bearer token come from kubeconfig.h's
//     Credentials at each request, so rotated files and exec plugins' answers are used;
//   - the server URL's path is the prefix of every request (a Rancher or Teleport URL);
//   - proxy-url, else HTTPS_PROXY / NO_PROXY as Go reads them (a loopback or "localhost"
//     server is never proxied from the environment);
//   - TCP keepalive (idle 15 s, 3 probes 5 s apart) and TCP_USER_TIMEOUT 30 s: a peer that
//     vanished without a FIN or RST is noticed within 30 s on a connection that carries nothing.
// A GET's body is read whole (a LIST page); a WATCH's body is handed over line by line; a write
// (the load balancer's status, Lease and Events) sends a body and reads its answer whole.
//
// Runs on: one API watcher thread each; stop() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "control/kube/kubeconfig.h"

namespace svcgate::ctl::kube {

// HttpResult::transport's reason for a stream whose body ended inside a line (an event cut
// mid-object).
inline constexpr const char* kCutInsideEvent = "the stream ended inside an event";
// HttpResult::transport's reason for a stream with a line over kMaxEventBytes.
inline constexpr const char* kEventTooLong = "a watch event longer than 16 MiB";

struct HttpResult {
    int status = 0;       // 0: no answer (transport says why)
    Status transport;     // failed: the transport or TLS, the stream cut, or a status not asked for
    std::string body;     // a GET's body; a stream's body when its status was not 200
    int retry_after = 0;  // the answer's Retry-After, in seconds (0: none)
};

class ApiClient {
public:
    ApiClient(const ApiServer& server, Credentials& creds);
    ~ApiClient();
    ApiClient(const ApiClient&) = delete;
    ApiClient& operator=(const ApiClient&) = delete;
    // A whole body (at most 512 MiB), read within `timeout_s`.
    HttpResult get(const std::string& path, int timeout_s);
    // A write: `method` (POST, PUT, PATCH, DELETE) with `body` of `content_type` ("" with no
    // body); the answer's body read whole within `timeout_s`. Any 2xx is a success.
    HttpResult send(const char* method, const std::string& path, const std::string& body,
                    const std::string& content_type, int timeout_s);
    // A 200 body handed over line by line (a line longer than kMaxEventBytes cuts the stream);
    // on_line returns false to end it. Silence for `idle_s` seconds cuts it ("no data for N s").
    HttpResult stream(const std::string& path, int idle_s, const std::function<bool(std::string_view)>& on_line);
    // Cuts what is under way, from another thread, within a second; later calls fail at once.
    void stop();

private:
    struct Write {
        const char* method;
        const std::string& body;
        const std::string& content_type;
    };
    HttpResult request(const std::string& path, int timeout_s, const std::function<bool(std::string_view)>* on_line,
                       const Write* write = nullptr);
    const ApiServer& server_;
    Credentials& creds_;
    void* curl_ = nullptr;  // CURL*: one handle, so that its connection is kept between requests
    std::string setup_error_;
    std::string proxy_;  // "" = direct
    std::atomic<bool> stopped_{false};
};

// The proxy for `server` from the kubeconfig's proxy-url, else from HTTPS_PROXY/https_proxy unless
// NO_PROXY/no_proxy names the host (a suffix match, "*" for all, host:port entries, CIDRs) or
// the host is loopback or "localhost" (Go's http.ProxyFromEnvironment). "" = direct.
std::string proxy_for(const ApiServer& server);

// `s` percent-encoded for a URL's query (RFC 3986's unreserved characters kept).
std::string query_escape(std::string_view s);

}  // namespace svcgate::ctl::kube
