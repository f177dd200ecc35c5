#include "util/mountinfo.hpp"

#include <sstream>

namespace agentbox {
namespace {

std::string unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    const bool octal = field[i] == '\\' && i + 3 < field.size() && field.find_first_not_of("01234567", i + 1) >= i + 4;
    if (octal) {
      out += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace

std::vector<MountInfoEntry> parse_mountinfo(const std::string& text) {
  std::vector<MountInfoEntry> entries;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    MountInfoEntry e;
    if (!(fields >> e.id >> e.parent >> e.device >> e.root >> e.point)) continue;
    e.root = unescape(e.root);
    e.point = unescape(e.point);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace agentbox
