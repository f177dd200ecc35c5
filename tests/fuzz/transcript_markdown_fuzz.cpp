// A session transcript (a JSONL file in the user's home, which the user can write) rendered as
// Markdown (agent/transcript.*, transcript_markdown.*, markdown_text.*); the same bytes also go
// through the Markdown pieces on their own, as a tool's output would.
//
// Checks: nothing throws; the document is valid UTF-8 and leaves no fence or marker-ended HTML
// block open (close_open_blocks changes nothing); a fenced block of any body ends exactly at
// its own last line (an HTML comment after it is outside the code); a code span is one line; a
// cut keeps a prefix whole to the character.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/markdown_text.hpp"
#include "agent/transcript_markdown.hpp"
#include "fuzz_check.hpp"
#include "util/utf8.hpp"

using namespace agentbox;
using namespace agentbox::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const MarkdownLimits limits{.block_bytes = 256, .block_lines = 8, .summary_chars = 16};
  const std::string md = transcript_markdown(
      parse_transcript(input), TranscriptAbout{"4237d65a-695c-4e11-9855-f6e1c3376809", "c`1", true}, limits);
  FUZZ_CHECK(is_valid_utf8(md));
  FUZZ_CHECK(close_open_blocks(md) == md);

  const std::string block = fenced_block(input, "text");
  FUZZ_CHECK(close_open_blocks(block + "<!--\n") == block + "<!--\n-->\n");
  FUZZ_CHECK(inline_code(input).find('\n') == std::string::npos);
  const CutText cut = cut_text(input, size / 2, 3);
  FUZZ_CHECK(input.starts_with(cut.kept) && cut.kept.size() + cut.cut_bytes == size);
  if (is_valid_utf8(input)) FUZZ_CHECK(is_valid_utf8(cut.kept));
  return 0;
}
