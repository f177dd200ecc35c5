#include "config/cluster_config.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

bool plain_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
  return true;
}

// HOST:PORT with a numeric port, the only shape of agentbox node (nginx also takes unix:).
void check_server(std::string_view server) {
  const size_t colon = server.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == server.size())
    throw Error("must be HOST:PORT, as nginx's server line writes it");
  for (char c : server.substr(colon + 1))
    if (c < '0' || c > '9') throw Error("must be HOST:PORT with a numeric port");
  for (char c : server)
    if (c <= ' ' || c == ';' || c == '{' || c == '}' || c == '"' || c == '\'' || c == '\\')
      throw Error("must not hold spaces, quotes or ;{}");
}

ClusterNode read_node(const toml::table& table) {
  ClusterNode node;
  for (const auto& [k, v] : table) {
    try {
      if (k.str() == "name") {
        node.name = toml_string(v);
        if (!plain_name(node.name)) throw Error("must be 1-63 letters, digits, - or _");
      } else if (k.str() == "server") {
        node.server = toml_string(v);
        check_server(node.server);
      } else if (k.str() == "admin_url") {
        node.admin_url = toml_string(v);
        if (node.admin_url.rfind("http://", 0) != 0 && node.admin_url.rfind("https://", 0) != 0)
          throw Error("must start with http:// or https://");
        while (!node.admin_url.empty() && node.admin_url.back() == '/') node.admin_url.pop_back();
      } else if (k.str() == "weight") {
        node.weight = static_cast<uint32_t>(toml_integer(v, 1, 100));
      } else if (k.str() == "drain") {
        const auto* b = v.as_boolean();
        if (!b) throw Error("expected true or false");
        node.drain = b->get();
      } else {
        throw Error("unknown key (expected name, server, admin_url, weight or drain)");
      }
    } catch (const Error& e) {
      throw e.wrap(k.str());
    }
  }
  if (node.name.empty()) throw Error("a node needs a name");
  if (node.server.empty()) throw Error("node " + node.name + " needs a server");
  if (node.admin_url.empty()) node.admin_url = "http://" + node.server;
  return node;
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\u{:04X}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

ClusterPins read_pins(const std::string& path, const std::vector<ClusterNode>& nodes) {
  std::optional<toml::table> doc = read_toml_file(path, /*missing_ok=*/true);
  ClusterPins pins;
  if (!doc) return pins;
  std::set<std::string, std::less<>> names;
  for (const ClusterNode& n : nodes) names.insert(n.name);
  throw_if_errors(walk_toml(*doc, {}, path, [&](std::string_view user, const toml::node& value) {
    std::string node = toml_string(value);
    if (!names.contains(node)) throw Error("pinned to " + node + ", which is not a node of the cluster");
    pins.emplace(std::string(user), std::move(node));
    return true;
  }));
  return pins;
}

}  // namespace

const ClusterNode* ClusterConfig::node(std::string_view name) const {
  for (const ClusterNode& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

ClusterConfig load_cluster_config(const std::string& path) {
  std::optional<toml::table> doc = read_toml_file(path, /*missing_ok=*/false);
  ClusterConfig config;
  config.path = path;
  std::string pins_file;
  std::vector<std::string> errors = walk_toml(*doc, {}, path, [&](std::string_view key, const toml::node& value) {
    if (key == "pins") {
      pins_file = toml_string(value);
      if (pins_file.empty()) throw Error("must name a file");
      return true;
    }
    if (key != "node") return false;
    const toml::array* array = value.as_array();
    if (!array || !array->is_array_of_tables()) throw Error("expected [[node]] tables");
    for (const toml::node& item : *array) config.nodes.push_back(read_node(*item.as_table()));
    return true;
  });
  throw_if_errors(errors);
  if (config.nodes.empty()) throw Error(path + ": no [[node]]: a cluster needs at least one");
  if (std::all_of(config.nodes.begin(), config.nodes.end(), [](const ClusterNode& n) { return n.drain; }))
    throw Error(path + ": every node drains: new users would have nowhere to go");
  std::set<std::string, std::less<>> names, servers;
  for (const ClusterNode& n : config.nodes) {
    if (!names.insert(n.name).second) throw Error(path + ": node name " + n.name + " appears twice");
    if (!servers.insert(n.server).second) throw Error(path + ": server " + n.server + " appears twice");
  }
  if (pins_file.empty()) pins_file = "pins.toml";
  config.pins_path = pins_file.front() == '/' ? pins_file : dir_of(path) + "/" + pins_file;
  config.pins = read_pins(config.pins_path, config.nodes);
  return config;
}

std::string cluster_file_text(const ClusterConfig& config) {
  std::string out = "# agentbox cluster: the ring nginx hashes users onto (docs/SCALING.md)\n";
  const std::string default_pins = dir_of(config.path) + "/pins.toml";
  if (config.pins_path != default_pins) out += "pins = " + quoted(config.pins_path) + "\n";
  for (const ClusterNode& n : config.nodes) {
    out += '\n';
    out += cluster_node_text(n);
  }
  return out;
}

std::string cluster_node_text(const ClusterNode& n) {
  std::string out = "[[node]]\nname = " + quoted(n.name) + "\nserver = " + quoted(n.server) + "\n";
  if (n.admin_url != "http://" + n.server) out += "admin_url = " + quoted(n.admin_url) + "\n";
  if (n.weight != 1) out += "weight = " + std::to_string(n.weight) + "\n";
  if (n.drain) out += "drain = true\n";
  return out;
}

std::string pins_file_text(const ClusterPins& pins) {
  std::string out = "# agentbox pins: accounts kept off their ring owner (written by agentbox)\n";
  for (const auto& [user, node] : pins) {
    toml::table line;
    line.insert(user, node);
    std::ostringstream s;
    s << line;
    out += s.str() + "\n";
  }
  return out;
}

}  // namespace agentbox
