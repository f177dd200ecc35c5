#pragma once
// Recorded Claude Code stream-json output (tests/agent_fixtures/, see its README) and a way to
// run it through the parser, for the agent's unit tests.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "agent/stream_json_parser.hpp"

namespace agentbox::testing {

inline std::string agent_fixture(const std::string& name) {
  std::string path = std::string(AGENTBOX_SOURCE_DIR) + "/tests/agent_fixtures/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

// An event that outlives the parser's callback (Event::line points into the parser's buffer).
struct OwnedEvent {
  std::string line;
  agent::EventBody body;
};

// Feeds bytes in pieces of `step` bytes (all at once for 0), then finishes.
inline std::vector<OwnedEvent> parse_all(std::string_view bytes, size_t step = 0,
                                         agent::StreamJsonParser::Limits limits = {}) {
  agent::StreamJsonParser parser(limits);
  std::vector<OwnedEvent> out;
  auto keep = [&](const agent::Event& e) { out.push_back(OwnedEvent{std::string(e.line), e.body}); };
  if (step == 0) {
    parser.feed(bytes, keep);
  } else {
    for (size_t i = 0; i < bytes.size(); i += step) parser.feed(bytes.substr(i, step), keep);
  }
  parser.finish(keep);
  return out;
}

inline agent::Event view(const OwnedEvent& e) { return agent::Event{e.line, e.body}; }

}  // namespace agentbox::testing
