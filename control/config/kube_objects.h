// Kubernetes `v1 Service` and `discovery.k8s.io/v1 EndpointSlice` objects → ServiceConfig, read
// the way kube-proxy reads them (pkg/proxy/serviceport.go, endpointslicecache.go):
//   - a `kind: List` (or any *List with items) or a multi-document stream, as kubectl prints;
//   - Service ports are matched to EndpointSlice ports by name and protocol; targetPort is
//     informational (the EndpointController already resolved it into the slices);
//   - conditions: missing ready = true, missing serving = true, missing terminating = false;
//     the endpoint's first address is the one used;
//   - all slices of a Service (label kubernetes.io/service-name, same namespace) are merged;
//   - headless (clusterIP None) and ExternalName Services are kept but get no dataplane rule;
//     IPv6-only Services, IPv6 slices and IPv6 addresses are skipped and counted.
// Errors and warnings carry the manifest's file:line:column.
//
// Runs on: the control thread and the command-line tools.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "control/config/config_model.h"
#include "control/config/yaml_tree.h"

namespace svcgate::ctl {

struct ManifestRef {
    std::string path;  // resolved (relative paths are relative to the config file)
    Mark from;         // where the config names it
};

// Appends the manifests' Services (with their slices) to cfg.services and fills cfg.kube.
// With `leave_out`, an object that cannot be read (or a slice whose Service is not there) is left
// out with its first error in cfg.left_out instead of failing the load.
void load_kube_manifests(const std::vector<ManifestRef>& files, Config& cfg, std::vector<ConfigIssue>& errors,
                         bool leave_out = false);

// "2 Services, 2 EndpointSlices; no rule for 0 headless and 0 ExternalName Services; ...".
std::string kube_summary(const KubeStats& k);

// The same for objects already in memory (one YAML stream), named `name` in messages.
void load_kube_string(const std::string& yaml, const std::string& name, Config& cfg, std::vector<ConfigIssue>& errors);

// Why an object from the API server is left out (status's kubernetes.api.rejected, the metric
// svcgate_kube_rejected_objects{reason}).
#define SVCGATE_REJECT_REASONS(X)                                                                \
    X(duplicate_service, "duplicate_service") /* a Service of the config file's name */          \
    X(invalid_object, "invalid_object")       /* it does not read: message is its first error */ \
    X(orphan_slice, "orphan_slice")           /* an EndpointSlice whose Service is not there */
enum class RejectReason : uint8_t { SVCGATE_REJECT_REASONS(SVCGATE_ENUM_ID) };
inline constexpr std::array kRejectReasonNames{SVCGATE_REJECT_REASONS(SVCGATE_ENUM_NAME)};
inline const char* reject_reason_name(RejectReason r) noexcept { return enum_name(r, kRejectReasonNames); }

// Objects from the API server (control/kube/), read one at a time so that each is read once per
// version (control/kube/ keeps the result beside the object). Unlike a file, one bad object does
// not fail the lot: read_kube_object records why it is left out (reason "invalid_object" and its
// first error) instead of throwing; add_kube_objects adds the good ones to cfg, lists the bad
// ones in `rejected`, leaves out a Service named as one already in cfg (the config file's) as
// "duplicate_service", and holds back a slice whose Service is not there, as kube-proxy's cache
// holds it, counting it in `orphan_slices`. ServiceCIDRs' CIDRs join cfg.cluster.service_cidrs.
struct KubeObjectRead {
    struct Slice {
        std::string ns, service;
        EndpointGroup group;
    };
    std::string name;  // in messages: "Service default/web"
    std::optional<ServiceConfig> service;
    std::optional<Slice> slice;
    std::vector<IpCidr> service_cidrs;   // a ServiceCIDR's spec.cidrs
    KubeStats stats;                     // what it adds to Config::kube
    std::optional<RejectReason> reason;  // left out: why, and its first error
    std::string message;
};
struct RejectedObject {
    std::string name;
    RejectReason reason = RejectReason::invalid_object;
    std::string message;
};
KubeObjectRead read_kube_object(const ytree::Node& obj, const std::string& name);
void add_kube_objects(const std::vector<const KubeObjectRead*>& objects, Config& cfg,
                      std::vector<RejectedObject>& rejected, unsigned& orphan_slices);

}  // namespace svcgate::ctl
