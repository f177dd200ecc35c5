#include "http/query_params.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include <boost/algorithm/string/predicate.hpp>

#include "http/error.hpp"

namespace agentbox::http {

namespace {

[[noreturn]] void invalid(std::string_view name, std::string_view want) {
  unprocessable("Query parameter '" + std::string(name) + "' must be " + std::string(want));
}

}  // namespace

std::string required_query(const Request& req, std::string_view name) {
  auto value = req.query_param(name);
  if (!value) unprocessable("Query parameter '" + std::string(name) + "' is required");
  return *value;
}

std::optional<int64_t> query_int(const Request& req, std::string_view name, int64_t min, int64_t max) {
  auto text = req.query_param(name);
  if (!text) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  std::string want = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (ec != std::errc() || end != text->data() + text->size() || v < min || v > max) invalid(name, want);
  return v;
}

std::optional<double> query_number(const Request& req, std::string_view name, double min, double max) {
  auto text = req.query_param(name);
  if (!text) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || !std::isfinite(v) || v < min || v > max)
    invalid(name, "a number from " + std::to_string(static_cast<int64_t>(min)) + " to " +
                      std::to_string(static_cast<int64_t>(max)));
  return v;
}

std::optional<bool> query_bool(const Request& req, std::string_view name) {
  auto text = req.query_param(name);
  if (!text) return std::nullopt;
  using boost::algorithm::iequals;
  for (const char* yes : {"true", "1", "yes", "on"})
    if (iequals(*text, yes)) return true;
  for (const char* no : {"false", "0", "no", "off"})
    if (iequals(*text, no)) return false;
  invalid(name, "a boolean (true or false)");
}

}  // namespace agentbox::http
