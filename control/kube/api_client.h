// One HTTPS connection to the API server (cpp-httplib over OpenSSL), verified against the
// kubeconfig's CA, with the client certificate and the bearer token of kubeconfig.h: a GET whose
// body is read whole (a LIST page) and a GET whose body is a stream of lines (a WATCH).
//
// Runs on: one API watcher thread each; stop() from any thread.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
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
    // Cuts what is under way, from another thread; later calls fail at once.
    void stop();

private:
    std::unique_ptr<httplib::SSLClient> connect(int read_timeout_s);
    HttpResult request(const std::string& path, int timeout_s, const std::function<bool(std::string_view)>* on_line);
    const ApiServer& server_;
    Credentials& creds_;
    std::mutex mu_;  // current_ against stop()
    bool stopped_ = false;
    httplib::SSLClient* current_ = nullptr;
};

}  // namespace svcgate::ctl::kube
