// A JSON value (an object the API server sent) as a ytree stream, so that the Kubernetes-object
// loader (control/config/kube_objects.h) reads it exactly as it reads `kubectl get -o yaml`:
// one reader, one set of semantics for files and for the API. Scalars keep JSON's text for
// numbers and booleans ("80", "true"); null is YAML's null. Positions are all 0:0 (an API object
// has no file position: its messages name the object instead).
//
// Runs on: the API watcher threads (control/kube/reflector.h).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "control/config/yaml_tree.h"

namespace svcgate::ctl::kube {

// The tree of one value; its root is node 0 (ytree::Node(tree.get(), 0)).
std::shared_ptr<const ytree::Tree> json_tree(const nlohmann::json& v);

}  // namespace svcgate::ctl::kube
