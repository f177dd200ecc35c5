// multipart/form-data as /files/upload reads it (http/multipart.*): the input's first line is
// the request's Content-Type (multipart_boundary), the rest is the body, fed to MultipartParser
// all at once and again in pieces of 1 to 64 bytes (chosen by the first byte), then finish().
//
// Checks: only HttpError escapes, with 400 or 422; a boundary is 1 to 70 characters; both
// feedings give the same parts (headers, contents, ends) and the same outcome; no part's
// contents hold the delimiter; contents never add up to more than the body.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "http/error.hpp"
#include "http/multipart.hpp"

namespace {

using namespace agentbox::http;

struct Part {
  PartHeaders headers;
  std::string data;
  bool ended = false;
};

struct Outcome {
  std::vector<Part> parts;
  std::string error;  // "STATUS detail" of the HttpError, "" when the body was complete
};

bool same(const Outcome& a, const Outcome& b) {
  if (a.error != b.error || a.parts.size() != b.parts.size()) return false;
  for (std::size_t i = 0; i < a.parts.size(); ++i) {
    const Part& x = a.parts[i];
    const Part& y = b.parts[i];
    if (x.headers.name != y.headers.name || x.headers.filename != y.headers.filename ||
        x.headers.content_type != y.headers.content_type || x.data != y.data || x.ended != y.ended)
      return false;
  }
  return true;
}

Outcome parse(const std::string& boundary, std::string_view body, std::size_t piece) {
  Outcome out;
  // Every other part is taken, as the route takes only its "file" field.
  MultipartParser parser(boundary, {.on_part =
                                        [&](const PartHeaders& h) {
                                          out.parts.push_back({h, {}, false});
                                          return out.parts.size() % 2 == 1;
                                        },
                                    .on_data =
                                        [&](std::string_view d) {
                                          FUZZ_CHECK(!out.parts.empty() && out.parts.size() % 2 == 1);
                                          FUZZ_CHECK(!out.parts.back().ended);
                                          out.parts.back().data += d;
                                        },
                                    .on_part_end =
                                        [&] {
                                          FUZZ_CHECK(!out.parts.empty() && out.parts.size() % 2 == 1);
                                          out.parts.back().ended = true;
                                        }});
  try {
    for (std::size_t i = 0; i < body.size(); i += piece) parser.feed(body.substr(i, piece));
    parser.finish();
    FUZZ_CHECK(parser.done());
  } catch (const HttpError& e) {
    FUZZ_CHECK(e.status() == status::bad_request);
    out.error = std::string(e.detail());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  std::string_view content_type = input.substr(0, eol);
  if (content_type.ends_with('\r')) content_type.remove_suffix(1);
  const std::string_view body = input.substr(eol + 1);

  std::string boundary;
  try {
    boundary = multipart_boundary(content_type);
  } catch (const HttpError& e) {
    FUZZ_CHECK(e.status() == status::bad_request || e.status() == status::unprocessable_entity);
    return 0;
  }
  FUZZ_CHECK(!boundary.empty() && boundary.size() <= 70);

  const Outcome whole = parse(boundary, body, body.size() + 1);
  const Outcome pieces = parse(boundary, body, 1 + data[0] % 64);
  FUZZ_CHECK(same(whole, pieces));

  const std::string delimiter = "\r\n--" + boundary;
  std::size_t total = 0;
  for (const Part& p : whole.parts) {
    FUZZ_CHECK(p.data.find(delimiter) == std::string::npos);
    total += p.data.size();
  }
  FUZZ_CHECK(total <= body.size());
  return 0;
}
