#pragma once
// Whole small files of a test, written and read back in one call.
#include <fstream>
#include <sstream>
#include <string>

namespace agentbox::testing {

// Creates or truncates path with exactly text.
inline void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// path's bytes ("" when it cannot be read).
inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace agentbox::testing
