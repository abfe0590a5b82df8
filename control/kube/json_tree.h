// A JSON value (an object the API server sent) as a ytree stream, so that the Kubernetes-object
// loader (control/config/kube_objects.h) reads it exactly as it reads `kubectl get -o yaml`:
// one reader, one set of semantics for files and for the API. Scalars keep JSON's text for
// numbers and booleans ("80", "true"); null is YAML's null. Positions are all 0:0 (an API object
// has no file position: its messages name the object instead).
//
// Runs on: the API watcher threads (control/kube/kube_api.h).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "control/config/yaml_tree.h"

namespace svcgate::ctl::kube {

// What the API server may send us, bounded before anything is built from it: an object nests
// about 10 levels (a Service's status.loadBalancer.ingress[].ports[] is the deepest), so 64 levels
// leave room for any real object while json_tree's recursion and nlohmann's destructor stay
// shallow. A watch line is one object (etcd refuses writes over 1.5 MiB; 16 MiB is ample).
inline constexpr unsigned kMaxJsonDepth = 64;
inline constexpr size_t kMaxEventBytes = 16u << 20;

// `text` as JSON within kMaxJsonDepth; a discarded value when it is not JSON or nests deeper, with
// `why` set ("not JSON", "nested deeper than 64 levels").
nlohmann::json parse_bounded(std::string_view text, std::string& why);

// The tree of one value (at most kMaxJsonDepth deep); its root is node 0 (ytree::Node(tree.get(), 0)).
std::shared_ptr<const ytree::Tree> json_tree(const nlohmann::json& v);

// Object `o`'s member `key`; null when `o` is not an object or has none.
const nlohmann::json* member(const nlohmann::json& o, const char* key);
// o[a][b] when it is a string, else "".
std::string string_at(const nlohmann::json& o, const char* a, const char* b);

}  // namespace svcgate::ctl::kube
