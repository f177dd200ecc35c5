// X-OpenWebUI-User-Jwt (http/openwebui_jwt.*): any header value an attacker sends.
//
// Checks: verify() never crashes and answers a user or a reason; a token it accepts is at most
// 8 KiB, of three parts, and names a non-empty user; the same input signed with the secret
// (sign()) is accepted exactly when it is a claims object with iss "open-webui", a numeric exp
// in the future and a non-empty string sub, and then names that sub.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "http/openwebui_jwt.hpp"

namespace {

constexpr std::int64_t kNow = 1'800'000'000;

bool acceptable_claims(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const auto iss = j.find("iss"), exp = j.find("exp"), sub = j.find("sub");
  return iss != j.end() && *iss == "open-webui" && exp != j.end() && exp->is_number() &&
         exp->get<double>() > static_cast<double>(kNow) && sub != j.end() && sub->is_string() &&
         !sub->get<std::string>().empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const agentbox::http::OpenWebuiJwt jwt("0123456789abcdef0123456789abcdef");
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const auto verdict = jwt.verify(input, kNow);
  if (const auto* user = std::get_if<std::string>(&verdict)) {
    FUZZ_CHECK(!user->empty());
    FUZZ_CHECK(input.size() <= 8 * 1024);
  }

  if (size > 5 * 1024) return 0;  // signed, it must stay under the token bound (8 KiB)
  const std::string token = jwt.sign(input);
  const auto signed_verdict = jwt.verify(token, kNow);
  const bool accepted = std::holds_alternative<std::string>(signed_verdict);
  FUZZ_CHECK(accepted == acceptable_claims(input));
  if (accepted)
    FUZZ_CHECK(std::get<std::string>(signed_verdict) == nlohmann::json::parse(input)["sub"].get<std::string>());
  return 0;
}
