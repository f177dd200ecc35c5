#pragma once
// Typed query parameters. A value that does not parse or is out of range is the client's
// validation error: HttpError 422 naming the parameter, as FastAPI (Open Terminal) answers.
// Absent (or "null") parameters are nullopt; callers apply their defaults.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/request.hpp"

namespace agentbox::http {

// A parameter that must be there: 422 "Query parameter 'NAME' is required" when absent.
std::string required_query(const Request& req, std::string_view name);

std::optional<int64_t> query_int(const Request& req, std::string_view name, int64_t min, int64_t max);
std::optional<double> query_number(const Request& req, std::string_view name, double min, double max);
// true/false, 1/0, yes/no, on/off (any case).
std::optional<bool> query_bool(const Request& req, std::string_view name);

}  // namespace agentbox::http
