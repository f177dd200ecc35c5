#include "http/multipart.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "http/error.hpp"

namespace agentbox::http {
namespace {

[[noreturn]] void malformed(std::string_view why) {
  throw HttpError(http::status::bad_request, "Malformed multipart body: " + std::string(why));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// A header value of the form `type; key=value; key="quoted value"`, split into the type and
// its parameters (keys lower-cased). Inside quotes only \" and \\ are escapes, as browsers do
// not escape backslashes in file names (WHATWG form encoding: '"' becomes %22).
struct HeaderValue {
  std::string type;
  std::vector<std::pair<std::string, std::string>> params;

  const std::string* param(std::string_view key) const {
    for (const auto& [k, v] : params)
      if (k == key) return &v;
    return nullptr;
  }
};

HeaderValue parse_header_value(std::string_view s) {
  HeaderValue out;
  size_t i = s.find(';');
  out.type = std::string(trim(s.substr(0, i)));
  while (i != std::string_view::npos && i < s.size()) {
    ++i;  // past ';'
    size_t eq = s.find_first_of("=;", i);
    if (eq == std::string_view::npos || s[eq] == ';') {  // a bare word: no value
      i = eq;
      continue;
    }
    std::string key(trim(s.substr(i, eq - i)));
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    size_t j = eq + 1;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
    std::string value;
    if (j < s.size() && s[j] == '"') {
      ++j;
      bool closed = false;
      for (; j < s.size(); ++j) {
        char c = s[j];
        if (c == '\\' && j + 1 < s.size() && (s[j + 1] == '"' || s[j + 1] == '\\')) {
          value += s[++j];
        } else if (c == '"') {
          closed = true;
          ++j;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) malformed("unterminated quoted string in a part header");
      i = s.find(';', j);
    } else {
      i = s.find(';', j);
      value = std::string(trim(s.substr(j, i == std::string_view::npos ? i : i - j)));
    }
    out.params.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 5987 ext-value ("UTF-8''na%C3%AFve.txt"); absent when it is not UTF-8 or badly encoded.
std::optional<std::string> decode_ext_value(std::string_view v) {
  size_t q = v.find('\'');
  if (q == std::string_view::npos || !iequals(v.substr(0, q), "utf-8")) return std::nullopt;
  size_t q2 = v.find('\'', q + 1);
  if (q2 == std::string_view::npos) return std::nullopt;
  std::string out;
  for (size_t i = q2 + 1; i < v.size(); ++i) {
    if (v[i] != '%') {
      out += v[i];
      continue;
    }
    if (i + 2 >= v.size() || hex_digit(v[i + 1]) < 0 || hex_digit(v[i + 2]) < 0) return std::nullopt;
    out += static_cast<char>(hex_digit(v[i + 1]) * 16 + hex_digit(v[i + 2]));
    i += 2;
  }
  return out;
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
  HeaderValue v = parse_header_value(content_type);
  if (!iequals(v.type, "multipart/form-data"))
    throw HttpError(http::status::unprocessable_entity, "Expected a multipart/form-data body with a 'file' field");
  const std::string* b = v.param("boundary");
  if (!b || b->empty() || b->size() > 70) malformed("Content-Type has no valid boundary (1 to 70 characters)");
  return *b;
}

PartHeaders parse_part_headers(std::string_view block) {
  PartHeaders out;
  bool has_disposition = false;
  while (!block.empty()) {
    size_t end = block.find("\r\n");
    std::string_view line = block.substr(0, end);
    block = end == std::string_view::npos ? std::string_view{} : block.substr(end + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) malformed("part header line without a name");
    std::string_view name = trim(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Disposition")) {
      HeaderValue v = parse_header_value(value);
      if (!iequals(v.type, "form-data")) malformed("part is not form-data");
      const std::string* field = v.param("name");
      if (!field) malformed("part has no field name");
      out.name = *field;
      if (const std::string* ext = v.param("filename*")) out.filename = decode_ext_value(*ext);
      if (!out.filename)
        if (const std::string* f = v.param("filename")) out.filename = *f;
      has_disposition = true;
    } else if (iequals(name, "Content-Type")) {
      out.content_type = std::string(value);
    }
  }
  if (!has_disposition) malformed("part without Content-Disposition");
  return out;
}

MultipartParser::MultipartParser(std::string boundary, Callbacks callbacks)
    : delimiter_("\r\n--" + boundary), cb_(std::move(callbacks)), buf_("\r\n") {
  // The leading CRLF lets a boundary on the body's first line match the same delimiter as the
  // others ("--B" there, "\r\n--B" everywhere else).
}

void MultipartParser::consume(size_t n) { pos_ += n; }

void MultipartParser::feed(std::string_view data) {
  if (state_ == State::done) return;  // the epilogue is ignored
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data);
  bool progress = true;
  while (progress && state_ != State::done) {
    switch (state_) {
      case State::preamble: progress = step_preamble(); break;
      case State::after_boundary: progress = step_after_boundary(); break;
      case State::headers: progress = step_headers(); break;
      case State::body: progress = step_body(); break;
      case State::done: break;
    }
  }
}

void MultipartParser::finish() {
  if (state_ != State::done) malformed("body ends before the closing boundary");
}

bool MultipartParser::step_preamble() {
  std::string_view in(buf_.data() + pos_, buf_.size() - pos_);
  size_t at = in.find(delimiter_);
  if (at == std::string_view::npos) {
    // Keep what could be the start of a delimiter split across feeds.
    if (in.size() >= delimiter_.size()) consume(in.size() - (delimiter_.size() - 1));
    return false;
  }
  consume(at + delimiter_.size());
  state_ = State::after_boundary;
  return true;
}

bool MultipartParser::step_after_boundary() {
  // RFC 2046 allows spaces and tabs ("transport padding") between a boundary and its CRLF.
  while (pos_ < buf_.size() && (buf_[pos_] == ' ' || buf_[pos_] == '\t')) ++pos_;
  if (buf_.size() - pos_ < 2) return false;
  std::string_view next(buf_.data() + pos_, 2);
  if (next == "--") {
    state_ = State::done;
    pos_ = buf_.size();
    return false;
  }
  if (next != "\r\n") malformed("boundary not followed by a line break");
  consume(2);
  state_ = State::headers;
  return true;
}

bool MultipartParser::step_headers() {
  std::string_view in(buf_.data() + pos_, buf_.size() - pos_);
  std::string_view block;
  if (in.size() < 2) return false;
  if (in.substr(0, 2) == "\r\n") {  // no header lines at all
    consume(2);
  } else {
    size_t end = in.find("\r\n\r\n");
    if (end == std::string_view::npos) {
      if (in.size() > kMaxHeaderBytes) malformed("part headers too long");
      return false;
    }
    if (end > kMaxHeaderBytes) malformed("part headers too long");
    block = in.substr(0, end);
    consume(end + 4);
  }
  PartHeaders headers = parse_part_headers(block);
  want_data_ = cb_.on_part ? cb_.on_part(headers) : false;
  state_ = State::body;
  return true;
}

bool MultipartParser::step_body() {
  std::string_view in(buf_.data() + pos_, buf_.size() - pos_);
  size_t at = in.find(delimiter_);
  if (at == std::string_view::npos) {
    if (in.size() >= delimiter_.size()) {
      size_t safe = in.size() - (delimiter_.size() - 1);
      if (want_data_ && cb_.on_data) cb_.on_data(in.substr(0, safe));
      consume(safe);
    }
    return false;
  }
  if (want_data_ && cb_.on_data) cb_.on_data(in.substr(0, at));
  consume(at + delimiter_.size());
  if (want_data_ && cb_.on_part_end) cb_.on_part_end();
  want_data_ = false;
  state_ = State::after_boundary;
  return true;
}

}  // namespace agentbox::http
