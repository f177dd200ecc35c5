#include "http/access_log.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <array>
#include <cctype>

#include "util/log.hpp"

namespace agentbox::http {

namespace urls = boost::urls;

namespace {

// Query parameter names whose values must not reach logs (signed download links, tokens).
constexpr std::array kSecretNameParts = {"token", "key", "secret", "sig", "password", "auth"};

bool looks_secret(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(kSecretNameParts.begin(), kSecretNameParts.end(),
                     [&](const char* part) { return lower.find(part) != std::string::npos; });
}

}  // namespace

std::string loggable_target(std::string_view target) {
  if (target.empty()) return "-";
  auto parsed = urls::parse_origin_form(target);
  if (!parsed) return "<invalid target>";
  std::string out(parsed->encoded_path());
  if (!parsed->has_query()) return out;
  out += '?';
  bool first = true;
  for (const auto& p : parsed->encoded_params()) {
    if (!first) out += '&';
    first = false;
    out += p.key;
    if (!p.has_value) continue;
    out += '=';
    if (looks_secret(p.key.decode()))
      out += "REDACTED";
    else
      out += p.value;
  }
  return out;
}

void log_access(const AccessRecord& r) {
  auto ms = std::chrono::duration<double, std::milli>(r.duration).count();
  log::info("http", "{} \"{} {}\" {} {}B {:.1f}ms", r.remote, r.method, loggable_target(r.target), r.status,
            r.body_bytes, ms);
}

}  // namespace agentbox::http
