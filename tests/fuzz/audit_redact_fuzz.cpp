// The audit trail's redaction of request bodies (audit/redact.*), fed any bytes: the body of a
// request at [audit] level REQUEST is the client's.
//
// Checks: nothing throws; the kept body is at most kBodyLimit bytes; a secret under a secret's
// name never comes out, whether the body around it is JSON (the input as a field's value beside
// an "api_key") or text (the input after a `password=` pair).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "audit/redact.hpp"
#include "fuzz_check.hpp"

using agentbox::audit::kBodyLimit;
using agentbox::audit::redact_body;

namespace {
constexpr std::string_view kSentinel = "SENTINELx9q7SECRET";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  FUZZ_CHECK(redact_body(text).size() <= kBodyLimit);
  // The sentinel must come from the secret's field only: an input that holds it may show it in
  // a field of its own, which is not a leak.
  if (text.find(kSentinel) != std::string_view::npos) return 0;

  nlohmann::json body = {{"api_key", kSentinel}, {"data", std::string(text)}};
  const std::string as_json = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  FUZZ_CHECK(redact_body(as_json).find(kSentinel) == std::string::npos);

  const std::string as_text = "password=" + std::string(kSentinel) + "&" + std::string(text);
  FUZZ_CHECK(redact_body(as_text).find(kSentinel) == std::string::npos);
  return 0;
}
