#pragma once
// nginx's `hash $key consistent` ring, computed exactly as nginx 1.22 computes it
// (ngx_http_upstream_hash_module.c): for each server string, 160 × weight points, point i being
// crc32(HOST "\0" PORT, then the previous point's hash as 4 little-endian bytes); points sorted,
// equal hashes kept once; a key goes to the first point at or above crc32(key), wrapping. Every
// node and the CLI compute the owner of a user this way, so nobody has to ask the router.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::cluster {

struct RingServer {
  std::string server;  // nginx's server string, e.g. "127.0.0.1:8101"
  uint32_t weight = 1;
};

class Ring {
 public:
  explicit Ring(const std::vector<RingServer>& servers);

  // Index into the servers given to the constructor of the owner of key. key must not be
  // empty (nginx balances an empty key round robin: no owner).
  size_t owner(std::string_view key) const;
  // The same, skipping the points of servers for which skip(index) is true, as nginx walks past
  // a server marked `down`: the owner on the ring without them.
  size_t owner(std::string_view key, const std::function<bool(size_t)>& skip) const;

  size_t points() const { return points_.size(); }

 private:
  struct Point {
    uint32_t hash;
    uint32_t server;
  };
  std::vector<Point> points_;
};

// CRC-32 (IEEE 802.3, reflected), nginx's ngx_crc32_long.
uint32_t crc32_of(std::string_view bytes);

}  // namespace agentbox::cluster
