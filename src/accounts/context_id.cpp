#include "accounts/context_id.hpp"

#include <iterator>

#include "http/error.hpp"

namespace agentbox::accounts {

namespace {

constexpr size_t kMaxContextChars = 256;
constexpr std::string_view kHeader = "X-Terminal-Context-Id";

[[noreturn]] void refuse(std::string_view why) {
  throw http::HttpError(http::status::bad_request, "Invalid " + std::string(kHeader) + ": " + std::string(why));
}

bool has_control(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace

std::string_view context_id_problem(std::string_view value) {
  if (value.size() > kMaxContextChars) return "longer than 256 characters";
  if (has_control(value)) return "it holds a control character";
  if (value == kDefaultContext) return {};
  for (std::string_view kind : {"chat:", "automation:"})
    if (value.starts_with(kind) && value.size() > kind.size()) return {};
  return "expected default, chat:<id> or automation:<id>";
}

std::string context_id_of(const http::Request& req) {
  auto range = req.headers.equal_range(kHeader);
  if (std::distance(range.first, range.second) > 1) refuse("it appears more than once");
  if (range.first == range.second || range.first->value().empty()) return std::string(kDefaultContext);
  const std::string_view value(range.first->value().data(), range.first->value().size());
  if (std::string_view why = context_id_problem(value); !why.empty()) refuse(why);
  return std::string(value);
}

}  // namespace agentbox::accounts
