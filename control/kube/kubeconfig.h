// Where the API server is and who we are to it, read as kubectl reads them (client-go's
// clientcmd and rest.InClusterConfig):
//   - a kubeconfig file: the named context or current-context; its cluster's server,
//     certificate-authority (a file, relative to the kubeconfig) or certificate-authority-data;
//     its user's token, tokenFile, client-certificate(-data) and client-key(-data), or an `exec`
//     credential plugin (client.authentication.k8s.io/v1 or v1beta1 ExecCredential);
//   - in-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's token file and CA under
//     /var/run/secrets/kubernetes.io/serviceaccount.
// TLS is always verified: insecure-skip-tls-verify is refused, and an http:// server too.
//
// Credentials: a token file, or client certificate files, are read again when their modification
// time changes (a projected service account token or a cert-manager certificate is rotated); an
// exec plugin's token or certificate is kept until its expirationTimestamp (or for the process's
// life without one), or until the server answers 401; a plugin is killed after
// kExecTimeoutSeconds, or at once when svcgate stops.
//
// Runs on: the control thread (load) and the API watcher threads (Credentials, locked inside).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "control/base/status.h"

namespace svcgate::ctl::kube {

struct ExecPlugin {
    std::string command;  // as written; a relative path with a '/' is relative to the kubeconfig
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;
    std::string api_version = "client.authentication.k8s.io/v1";
};

struct ApiServer {
    std::string server;  // "https://10.0.0.1:6443/k8s/clusters/c-1"
    std::string host;    // "10.0.0.1" (brackets off an IPv6 literal)
    int port = 443;
    std::string path_prefix;          // "/k8s/clusters/c-1": before every request's path; "" for none
    std::string tls_server_name;      // the cluster's tls-server-name: verified and sent as SNI
    std::string proxy_url;            // the cluster's proxy-url; "" = the environment's (api_client.h)
    std::string ca_pem;               // the CA certificates to verify the server with
    std::string cert_pem, key_pem;    // the client certificate (inline data), if any
    std::string cert_file, key_file;  // or its files, read again when they change
    std::string token;                // a fixed bearer token
    std::string token_file;           // read on use
    ExecPlugin exec;                  // command empty: none
    std::string source;               // "kubeconfig /etc/kube.conf, context lab" or "in-cluster"
};

// The API server of a kubeconfig (context "" = current-context). Throws ConfigError (one issue) with
// a message naming the file and what is wrong.
ApiServer load_kubeconfig(const std::string& path, const std::string& context);
// The pod's own (rest.InClusterConfig); `root` replaces /var/run/secrets/... for tests.
ApiServer in_cluster(const std::string& root = "/var/run/secrets/kubernetes.io/serviceaccount");

// "https://host:port/prefix" split (prefix "" or "/..." without a trailing '/'); throws for
// anything else.
void split_server(const std::string& server, std::string& host, int& port, std::string& prefix);

// How long an exec plugin may run before it is killed (client-go bounds it by the request's
// context; a plugin that hangs must not hold the watch threads or the shutdown).
inline constexpr int kExecTimeoutSeconds = 30;

struct ClientCert {
    std::string cert_pem, key_pem;  // both empty: none
    Status read;                    // failed: the files could not be read, no request is made
};

// An RFC 3339 time ("2026-11-25T21:00:00Z", with a fraction as RFC3339Nano writes it, or an
// offset) as Unix seconds; -1 if not one.
double parse_rfc3339(const std::string& s);

// The bearer token to send now: the fixed one, the token file's (re-read when it changed), or
// the exec plugin's (run again when expired or invalidated). "" = none. Errors go to error().
class Credentials {
public:
    explicit Credentials(ApiServer s) : s_(std::move(s)) {}
    std::string bearer();
    // The client certificate to present now: inline data, the files (read again when either's
    // modification time changed), or what the exec plugin returned (clientCertificateData).
    ClientCert client_cert();
    void invalidate();  // the server said 401: the next bearer() runs the plugin again
    void cancel();      // shutting down: a plugin running now is killed, none is started
    std::string error() const;
    unsigned exec_runs() const;

private:
    Status run_exec(std::unique_lock<std::mutex>& lk);
    Status run_plugin(std::string& text) const;
    Status take_credential(const std::string& text);
    mutable std::mutex mu_;
    std::condition_variable exec_cv_;  // a plugin run ended
    bool exec_running_ = false;
    ApiServer s_;
    std::string file_token_, exec_token_, error_;
    std::string exec_cert_, exec_key_;  // an exec plugin's clientCertificateData / clientKeyData
    std::timespec file_mtime_{};
    ClientCert file_cert_;
    std::timespec cert_mtime_{}, key_mtime_{};
    std::atomic<bool> cancelled_{false};
    double exec_expiry_ = 0;  // Unix seconds; 0 = none given
    bool exec_valid_ = false;
    unsigned exec_runs_ = 0;
};

}  // namespace svcgate::ctl::kube
