#include "cluster/ring.hpp"

#include <algorithm>
#include <stdexcept>

#include <boost/crc.hpp>

namespace agentbox::cluster {
namespace {

constexpr uint32_t kPointsPerWeight = 160;

// nginx splits HOST and PORT at the last ':' followed only by digits; otherwise it is all host.
void split_server(std::string_view server, std::string_view& host, std::string_view& port) {
  host = server;
  port = {};
  for (size_t j = 0; j < server.size(); ++j) {
    const char c = server[server.size() - j - 1];
    if (c == ':') {
      host = server.substr(0, server.size() - j - 1);
      port = server.substr(server.size() - j);
      return;
    }
    if (c < '0' || c > '9') return;
  }
}

}  // namespace

uint32_t crc32_of(std::string_view bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

Ring::Ring(const std::vector<RingServer>& servers) {
  if (servers.empty()) throw std::invalid_argument("a ring needs at least one server");
  for (uint32_t s = 0; s < servers.size(); ++s) {
    std::string_view host, port;
    split_server(servers[s].server, host, port);
    boost::crc_32_type base;
    base.process_bytes(host.data(), host.size());
    base.process_byte(0);
    base.process_bytes(port.data(), port.size());
    uint32_t prev = 0;
    for (uint32_t j = 0; j < kPointsPerWeight * servers[s].weight; ++j) {
      boost::crc_32_type point = base;
      const unsigned char le[4] = {static_cast<unsigned char>(prev), static_cast<unsigned char>(prev >> 8),
                                   static_cast<unsigned char>(prev >> 16), static_cast<unsigned char>(prev >> 24)};
      point.process_bytes(le, sizeof le);
      prev = point.checksum();
      points_.push_back({prev, s});
    }
  }
  // nginx sorts with qsort (not stable) and keeps the first of equal hashes: which server wins a
  // collision there is unspecified; with 32-bit hashes it takes ~10^4 servers to expect one.
  std::stable_sort(points_.begin(), points_.end(), [](const Point& a, const Point& b) { return a.hash < b.hash; });
  points_.erase(
      std::unique(points_.begin(), points_.end(), [](const Point& a, const Point& b) { return a.hash == b.hash; }),
      points_.end());
}

size_t Ring::owner(std::string_view key) const {
  return owner(key, [](size_t) { return false; });
}

size_t Ring::owner(std::string_view key, const std::function<bool(size_t)>& skip) const {
  const uint32_t hash = crc32_of(key);
  const auto first =
      std::lower_bound(points_.begin(), points_.end(), hash, [](const Point& p, uint32_t h) { return p.hash < h; });
  size_t i = static_cast<size_t>(first - points_.begin());
  for (size_t tried = 0; tried < points_.size(); ++tried, ++i) {
    const Point& p = points_[i % points_.size()];
    if (!skip(p.server)) return p.server;
  }
  throw std::invalid_argument("every server of the ring is skipped");
}

}  // namespace agentbox::cluster
