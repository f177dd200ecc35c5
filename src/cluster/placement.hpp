#pragma once
// Who owns a user in a cluster: the pin if there is one, else nginx's ring. Built from the
// cluster file; a node keeps one and asks it before creating an account (the placement guard).
#include <string>
#include <string_view>

#include "cluster/ring.hpp"
#include "config/cluster_config.hpp"

namespace agentbox::cluster {

class Placement {
 public:
  // self: this node's name, which must be a node of config ("" for the CLI, which is no node).
  Placement(ClusterConfig config, std::string self);

  // The node that owns user (a pin, else the ring).
  const ClusterNode& owner(std::string_view user) const;
  // The ring's owner, pins aside.
  const ClusterNode& ring_owner(std::string_view user) const;
  bool owns(std::string_view user) const { return owner(user).name == self_; }

  const ClusterNode& self() const;
  const ClusterConfig& config() const { return config_; }

 private:
  ClusterConfig config_;
  std::string self_;
  Ring ring_;
};

}  // namespace agentbox::cluster
