// One HTTPS client of the API server (cpp-httplib over OpenSSL, keep-alive: a LIST's pages share a
// connection), verified against the kubeconfig's CA, with its client certificate (both read from
// PEM once) and the bearer token of kubeconfig.h at each request: a GET whose body is read whole
// (a LIST page) and a GET whose body is a stream of lines (a WATCH).
//
// Runs on: one API watcher thread each; stop() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "control/kube/kubeconfig.h"

namespace httplib {
class SSLClient;
}

namespace svcgate::ctl::kube {

// HttpResult::error of a stream whose body ended inside a line (an event cut mid-object).
inline constexpr const char* kCutInsideEvent = "the stream ended inside an event";

struct HttpResult {
    int status = 0;     // 0: no answer (error says why)
    std::string error;  // transport or TLS failure, or why the stream was cut
    std::string body;   // a GET's body; a stream's body when its status was not 200
};

class ApiClient {
public:
    ApiClient(const ApiServer& server, Credentials& creds);
    ~ApiClient();
    // A whole body (at most 512 MiB), read within `timeout_s`.
    HttpResult get(const std::string& path, int timeout_s);
    // A 200 body handed over line by line (a line longer than 64 MiB cuts the stream); on_line
    // returns false to end it. Silence for `idle_s` seconds cuts it (error "silent for N s").
    HttpResult stream(const std::string& path, int idle_s, const std::function<bool(std::string_view)>& on_line);
    // Cuts what is under way, from another thread; later calls fail at once. (A request between
    // its start and its socket's opening is not cut: call again until the caller has returned.)
    void stop();

private:
    HttpResult request(const std::string& path, int timeout_s, const std::function<bool(std::string_view)>* on_line);
    Credentials& creds_;
    std::unique_ptr<httplib::SSLClient> client_;  // null when the PEM was not usable: setup_error_
    std::string setup_error_;
    std::atomic<bool> stopped_{false};
};

}  // namespace svcgate::ctl::kube
