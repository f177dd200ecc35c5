// A SKILL.md's front matter (fs/front_matter.*), fed any text: skills are files their users
// write, read by the daemon for GET /skills.
//
// Checks: no crash or leak in libyaml's parse of the block; without a block the body is the
// whole text (a byte order mark aside); with one, the body is a tail of the text; fields come
// only from a block libyaml parsed as a mapping; the split is a function of the text alone.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fs/front_matter.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const agentbox::FrontMatter fm = agentbox::split_front_matter(text);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  if (!fm.present) FUZZ_CHECK(fm.body == text);
  FUZZ_CHECK(fm.body.size() <= text.size());
  FUZZ_CHECK(text.ends_with(fm.body));
  if (!fm.valid) FUZZ_CHECK(fm.fields.empty());
  if (fm.valid) FUZZ_CHECK(fm.present);
  const agentbox::FrontMatter again =
      agentbox::split_front_matter(std::string_view(reinterpret_cast<const char*>(data), size));
  FUZZ_CHECK(again.body == fm.body && again.fields == fm.fields);
  return 0;
}
