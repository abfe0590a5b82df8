#include "control/kube/api_client.h"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <httplib.h>

#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace svcgate::ctl::kube {

namespace {

constexpr size_t kMaxBody = 512u << 20;
constexpr size_t kMaxLine = 64u << 20;

// The CA bundle as a store; null when none of it is a certificate.
X509_STORE* ca_store(const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (!bio) return nullptr;
    STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (!infos) return nullptr;
    X509_STORE* store = X509_STORE_new();
    int added = 0;
    for (int i = 0; i < sk_X509_INFO_num(infos); ++i)
        if (X509_INFO* info = sk_X509_INFO_value(infos, i); info->x509 && X509_STORE_add_cert(store, info->x509) == 1)
            ++added;
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    if (!added) {
        X509_STORE_free(store);
        return nullptr;
    }
    return store;
}

// A Status body's message ("services is forbidden: ..."), or the body's start.
std::string message_of(const std::string& body) {
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
    return body.substr(0, 200);
}

}  // namespace

ApiClient::ApiClient(const ApiServer& server, Credentials& creds) : creds_(creds) {
    X509* cert = nullptr;
    EVP_PKEY* key = nullptr;
    if (!server.cert_pem.empty()) {
        BIO* cb = BIO_new_mem_buf(server.cert_pem.data(), static_cast<int>(server.cert_pem.size()));
        BIO* kb = BIO_new_mem_buf(server.key_pem.data(), static_cast<int>(server.key_pem.size()));
        cert = cb ? PEM_read_bio_X509(cb, nullptr, nullptr, nullptr) : nullptr;
        key = kb ? PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr) : nullptr;
        if (cb) BIO_free(cb);
        if (kb) BIO_free(kb);
    }
    X509_STORE* store = ca_store(server.ca_pem);
    if (!store) {
        setup_error_ = "the CA is not PEM certificates";
    } else if (!server.cert_pem.empty() && !(cert && key)) {
        setup_error_ = "the client certificate or key is not PEM";
        X509_STORE_free(store);
    } else {
        client_ = cert ? std::make_unique<httplib::SSLClient>(server.host, server.port, cert, key)
                       : std::make_unique<httplib::SSLClient>(server.host, server.port);
        client_->set_ca_cert_store(store);  // the client owns it now
        client_->enable_server_certificate_verification(true);
        client_->set_connection_timeout(5, 0);
        client_->set_write_timeout(10, 0);
        client_->set_keep_alive(true);
    }
    if (cert) X509_free(cert);  // the client holds its own references
    if (key) EVP_PKEY_free(key);
}

ApiClient::~ApiClient() = default;

HttpResult ApiClient::get(const std::string& path, int timeout_s) { return request(path, timeout_s, nullptr); }

HttpResult ApiClient::stream(const std::string& path, int idle_s,
                             const std::function<bool(std::string_view)>& on_line) {
    return request(path, idle_s, &on_line);
}

HttpResult ApiClient::request(const std::string& path, int timeout_s,
                              const std::function<bool(std::string_view)>* on_line) {
    HttpResult r;
    if (!client_) {
        r.error = setup_error_;
        return r;
    }
    if (stopped_) {
        r.error = "stopped";
        return r;
    }
    client_->set_read_timeout(timeout_s, 0);
    if (const std::string t = creds_.bearer(); !t.empty()) client_->set_bearer_token_auth(t);
    std::string line;
    bool cut = false;  // on_line ended it, or a line grew too long
    const httplib::Headers headers{{"Accept", "application/json"}};
    auto res = client_->Get(
        path, headers,
        [&](const httplib::Response& resp) {
            r.status = resp.status;
            return !stopped_;
        },
        [&](const char* data, size_t n) {
            if (stopped_) return false;
            if (!on_line || r.status != 200) {
                if (r.body.size() + n > kMaxBody) return false;
                r.body.append(data, n);
                return true;
            }
            for (size_t i = 0; i < n;) {
                const char* nl = static_cast<const char*>(memchr(data + i, '\n', n - i));
                const size_t end = nl ? static_cast<size_t>(nl - data) : n;
                line.append(data + i, end - i);
                if (line.size() > kMaxLine) {
                    r.error = "a watch event longer than 64 MiB";
                    cut = true;
                    return false;
                }
                i = end;
                if (nl) {
                    ++i;
                    if (!line.empty() && !(*on_line)(line)) {
                        cut = true;
                        return false;
                    }
                    line.clear();
                }
            }
            return true;
        });
    if (!res && !cut && r.error.empty()) {
        const httplib::Error e = res.error();
        r.error = e == httplib::Error::Read && on_line
            ? fmt::format("no data for {} s, or the connection was cut", timeout_s)
            : httplib::to_string(e);
        if (e == httplib::Error::SSLServerVerification)
            r.error = "the server's certificate does not verify against the CA";
        if (e == httplib::Error::SSLConnection) r.error = "TLS handshake failed (the CA, or the client certificate?)";
    }
    if (on_line && r.status == 200 && !line.empty() && !cut) r.error = kCutInsideEvent;  // whatever the transport said
    if (r.status == 401) creds_.invalidate();
    if (r.status != 200 && r.status != 0 && r.error.empty())
        r.error = fmt::format("HTTP {}: {}", r.status, message_of(r.body));
    return r;
}

void ApiClient::stop() {
    stopped_ = true;
    if (client_) client_->stop();  // httplib: shuts the socket of what is under way
}

}  // namespace svcgate::ctl::kube
