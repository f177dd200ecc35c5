#pragma once
// multipart/form-data (RFC 7578) as a push parser, for /files/upload: bytes go in as they come
// (from the spooled body), part contents come out as they are found, so a file of any size
// passes through a buffer of a few tens of KiB and is never held whole in memory.
//
// Malformed input (also part headers over kMaxHeaderBytes) throws HttpError 400 "Malformed
// multipart body: ..."; what the parts mean (a missing field is a 422) is the route's business.
// Exceptions thrown by the callbacks pass through feed() unchanged.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentbox::http {

// The boundary parameter of a "multipart/form-data; boundary=..." Content-Type. HttpError 422
// when the type is not multipart/form-data, 400 when the boundary is missing or invalid
// (RFC 2046: 1..70 characters).
std::string multipart_boundary(std::string_view content_type);

struct PartHeaders {
  std::string name;                     // Content-Disposition name parameter
  std::optional<std::string> filename;  // Content-Disposition filename (filename* preferred)
  std::string content_type;             // "" when the part has none
};

class MultipartParser {
 public:
  // on_part: a part begins; return true to receive its contents through on_data.
  // on_data: a piece of the current part's contents (pieces of any size, possibly empty).
  // on_part_end: the current part is complete.
  struct Callbacks {
    std::function<bool(const PartHeaders&)> on_part;
    std::function<void(std::string_view)> on_data;
    std::function<void()> on_part_end;
  };

  // Headers of one part longer than this are refused.
  static constexpr size_t kMaxHeaderBytes = 16 * 1024;

  MultipartParser(std::string boundary, Callbacks callbacks);

  // Feeds the next bytes of the body.
  void feed(std::string_view data);
  // The body ended: throws unless the closing boundary was seen.
  void finish();
  bool done() const { return state_ == State::done; }

 private:
  enum class State { preamble, after_boundary, headers, body, done };

  // Each consumes what it can from buf_ and returns false when it needs more input.
  bool step_preamble();
  bool step_after_boundary();
  bool step_headers();
  bool step_body();
  void consume(size_t n);

  std::string delimiter_;  // "\r\n--" + boundary
  Callbacks cb_;
  State state_ = State::preamble;
  std::string buf_;
  size_t pos_ = 0;  // start of unconsumed input in buf_
  bool want_data_ = false;
};

// Parses the header block of one part ("Name: value" lines, CRLF-separated). Throws HttpError
// 400 when Content-Disposition is missing or not form-data with a name.
PartHeaders parse_part_headers(std::string_view block);

}  // namespace agentbox::http
