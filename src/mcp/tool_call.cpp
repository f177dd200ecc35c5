#include "mcp/tool_call.hpp"

#include <boost/beast/core/detail/base64.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "mcp/route_call.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kPollSeconds = 2;  // one poll's longest wait; it returns sooner on new output

json text_result(std::string text, bool is_error) {
  json r = {{"content", json::array({{{"type", "text"}, {"text", std::move(text)}}})}};
  if (is_error) r["isError"] = true;
  return r;
}

// An image the route answered (read_file of a PNG): an MCP image block the model can see.
std::optional<json> image_result(const http::Response& r) {
  auto type = r.headers.find(http::field::content_type);
  if (type == r.headers.end() || !type->value().starts_with("image/")) return std::nullopt;
  std::string data(boost::beast::detail::base64::encoded_size(r.body.size()), '\0');
  data.resize(boost::beast::detail::base64::encode(data.data(), r.body.data(), r.body.size()));
  return json{
      {"content",
       json::array({{{"type", "image"}, {"data", std::move(data)}, {"mimeType", std::string(type->value())}}})}};
}

json result_of(const http::Response& r) {
  if (static_cast<unsigned>(r.status) < 400)
    if (auto image = image_result(r)) return *image;
  auto parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (static_cast<unsigned>(r.status) >= 400) {
    std::string detail = r.body;
    if (parsed.is_object() && parsed.contains("detail"))
      detail = parsed["detail"].is_string() ? parsed["detail"].get<std::string>() : parsed["detail"].dump();
    return text_result(detail + " (HTTP " + std::to_string(static_cast<unsigned>(r.status)) + ")", true);
  }
  if (parsed.is_discarded()) return text_result(r.body, false);
  json result = text_result(parsed.dump(), false);
  if (parsed.is_object()) result["structuredContent"] = std::move(parsed);
  return result;
}

std::string output_text(const json& process) {
  std::string text;
  const json output = process.value("output", json::array());
  for (const json& chunk : output) text += chunk.value("data", "");
  return text;
}

// run_command driven with progress: the state of one call between its polls.
struct ProgressRun : std::enable_shared_from_this<ProgressRun> {
  const http::Router& router;
  Tool status_tool;
  CallerContext caller;
  json token;
  ProgressSink progress;
  ResultSink done;
  Clock::time_point deadline;
  json process;  // the answer so far, output accumulated
  double sent = 0;

  ProgressRun(const http::Router& r, Tool status, CallerContext c, json t, ProgressSink p, ResultSink d)
      : router(r),
        status_tool(std::move(status)),
        caller(std::move(c)),
        token(std::move(t)),
        progress(std::move(p)),
        done(std::move(d)) {}

  // False when the client is gone.
  bool report(const json& answer) {
    std::string text = output_text(answer);
    sent += 1;
    json params = {{"progressToken", token}, {"progress", sent}};
    if (!text.empty()) params["message"] = text;
    return progress(std::move(params));
  }

  void on_answer(const http::Response& r, bool first) {
    auto parsed = json::parse(r.body, nullptr, false);
    if (static_cast<unsigned>(r.status) >= 400 || !parsed.is_object()) {
      done(result_of(r));
      return;
    }
    if (first) {
      process = parsed;
    } else {
      const json output = parsed.value("output", json::array());
      for (const json& chunk : output) process["output"].push_back(chunk);
      for (const char* key : {"status", "exit_code", "next_offset", "truncated"})
        if (parsed.contains(key)) process[key] = parsed[key];
    }
    const bool listening = report(parsed);
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (!listening || process.value("status", "") != "running" || left <= 0) {
      json result = text_result(process.dump(), false);
      result["structuredContent"] = process;
      done(std::move(result));
      return;
    }
    json args = {{"id", process.value("id", "")},
                 {"offset", process.value("next_offset", 0)},
                 {"wait", std::min(kPollSeconds, left)}};
    call_route(router, status_tool, args, caller,
               [self = shared_from_this()](http::Response next) { self->on_answer(next, false); });
  }
};

}  // namespace

void call_tool(const http::Router& router, const Tool& tool, const json& given, const CallerContext& caller,
               std::optional<json> progress_token, const Tool* poll, ProgressSink progress, ResultSink done) {
  json arguments = given;
  for (const auto& [name, value] : tool.defaults.items())
    if (!arguments.contains(name) || arguments[name].is_null()) arguments[name] = value;
  const bool polled = progress_token && poll && tool.name == "run_command" && !arguments.contains("tail");
  if (!polled) {
    call_route(router, tool, arguments, caller, [done = std::move(done)](http::Response r) { done(result_of(r)); });
    return;
  }
  double wait = 0;
  if (arguments.contains("wait") && arguments["wait"].is_number())
    wait = std::clamp(arguments["wait"].get<double>(), 0.0, 300.0);
  auto run =
      std::make_shared<ProgressRun>(router, *poll, caller, *progress_token, std::move(progress), std::move(done));
  run->deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(wait * 1000));
  json start = arguments;
  start["wait"] = 0;  // the id at once; each poll then returns as output arrives
  call_route(router, tool, start, caller, [run](http::Response r) { run->on_answer(r, true); });
}

}  // namespace agentbox::mcp
