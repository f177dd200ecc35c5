#include "net/request_worst_case.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <span>
#include <vector>

namespace agentbox::net {

namespace {

using json = nlohmann::json;

bool listed(std::span<const std::string_view> list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Where a value sits, as far as the bound cares: content blocks are what may cost more
// tokens than bytes, and the top level names the features that do.
enum class Place { root, block_list, messages, message, block, tools, tool, other };

// The SAX handler (nlohmann::json::sax_parse calls it for each token of the body).
class Scan {
 public:
  std::optional<uint64_t> max_tokens;
  std::string refusal;  // set: stop, refused
  std::string heavy;    // set: something in the body costs more tokens than its bytes

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return number(false, 0); }
  bool number_unsigned(json::number_unsigned_t n) { return number(true, n); }
  bool number_float(json::number_float_t, const std::string&) { return number(false, 0); }
  bool binary(json::binary_t&) { return value(); }
  bool string(std::string& s) {
    if (!value()) return false;
    if (key_ == "type") {
      Place where = frames_.back();
      if (where == Place::block && !listed(kTextBlockTypes, s))
        mark_heavy(fmt::format("a content block of type {:?}", s));
      if (where == Place::tool && s != "custom") mark_heavy(fmt::format("a tool of type {:?}", s));
    }
    return true;
  }
  bool start_object(size_t) { return open(true); }
  bool start_array(size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    key_ = std::move(k);
    if (frames_.size() == 1 && !listed(kTextRootKeys, key_)) mark_heavy(fmt::format("the field {:?}", key_));
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception&) {
    if (refusal.empty()) refusal = fmt::format("agentbox: the request body is not valid JSON (at byte {})", position);
    return false;
  }

 private:
  bool refuse(std::string why) {
    refusal = std::move(why);
    return false;
  }
  void mark_heavy(std::string why) {
    if (heavy.empty()) heavy = std::move(why);
  }
  bool at_max_tokens() const { return frames_.size() == 1 && key_ == "max_tokens"; }
  bool not_whole() { return refuse("agentbox: max_tokens must be a whole number of tokens"); }
  // A value other than a number: only the top level's object may be the whole body.
  bool value() {
    if (frames_.empty()) return refuse("agentbox: the request body is not a JSON object");
    return at_max_tokens() ? not_whole() : true;
  }
  bool number(bool whole, uint64_t n) {
    if (frames_.empty()) return refuse("agentbox: the request body is not a JSON object");
    if (!at_max_tokens()) return true;
    if (max_tokens) return refuse("agentbox: the request body names max_tokens twice");
    if (!whole) return not_whole();
    max_tokens = n;
    return true;
  }
  bool open(bool object) {
    if (frames_.empty()) {
      if (!object) return refuse("agentbox: the request body is not a JSON object");
      frames_.push_back(Place::root);
      return true;
    }
    if (frames_.size() >= kMaxDepth)
      return refuse(fmt::format("agentbox: the request body is nested deeper than {} levels", kMaxDepth));
    if (at_max_tokens()) return not_whole();
    frames_.push_back(child(frames_.back(), object));
    key_.clear();
    return true;
  }
  bool close() {
    frames_.pop_back();
    key_.clear();  // a key names the next value of its own object only
    return true;
  }
  Place child(Place parent, bool object) const {
    switch (parent) {
      case Place::root:
        if (object) return Place::other;
        if (key_ == "messages") return Place::messages;
        if (key_ == "system") return Place::block_list;
        if (key_ == "tools") return Place::tools;
        return Place::other;
      case Place::messages: return object ? Place::message : Place::other;
      case Place::message: return !object && key_ == "content" ? Place::block_list : Place::other;
      case Place::block_list: return object ? Place::block : Place::other;
      case Place::block: return !object && key_ == "content" ? Place::block_list : Place::other;  // tool_result
      case Place::tools: return object ? Place::tool : Place::other;
      default: return Place::other;
    }
  }

  std::vector<Place> frames_;
  std::string key_;  // the key of the value that comes next in the innermost object
};

}  // namespace

WorstCaseScan worst_case_tokens(std::string_view body, uint64_t context_tokens) {
  WorstCaseScan out;
  Scan scan;
  bool ok = false;
  try {
    ok = json::sax_parse(body, &scan, json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || !scan.refusal.empty()) {
    out.refusal = scan.refusal.empty() ? "agentbox: the request body is not valid JSON" : scan.refusal;
    return out;
  }
  if (!scan.max_tokens) {
    out.refusal = "agentbox: the request body has no top-level max_tokens, which a token budget needs";
    return out;
  }
  WorstCase w;
  w.output = *scan.max_tokens;
  if (scan.heavy.empty()) {
    w.input = body.size() + kPromptAllowance;
    w.input_bound = "the body's size";
  } else {
    w.input = context_tokens;
    w.input_bound = "context_tokens, for " + scan.heavy;
  }
  out.worst = std::move(w);
  return out;
}

}  // namespace agentbox::net
