#pragma once
// Download links a browser can open without the API key: the agent appends links to the files
// a turn made (/files/view?path=...&user_id=...&token=...), and a browser sends no Bearer
// header. A token is an HMAC-SHA256, under a key of the daemon's own (STATE/link_key), of the
// user id, the path exactly as the link names it, and an expiry: it opens that one path for
// that one user until then, and nothing else. Comparison is constant-time.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace agentbox::http {

class SignedLinks {
 public:
  explicit SignedLinks(std::string_view key);  // any length; hashed to the HMAC key

  // "EXPIRES.HEX": valid for (user, path) until expires (unix seconds).
  std::string sign(std::string_view user, std::string_view path, int64_t expires) const;
  // True when token is sign(user, path, e) for some e > now.
  bool verify(std::string_view user, std::string_view path, std::string_view token, int64_t now) const;

 private:
  std::array<unsigned char, 32> mac(std::string_view user, std::string_view path, int64_t expires) const;
  std::array<unsigned char, 32> key_{};
};

}  // namespace agentbox::http
