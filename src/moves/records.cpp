#include "moves/records.hpp"

#include "util/error.hpp"

namespace agentbox::moves {

nlohmann::json records_json(const MovedRecords& r) {
  nlohmann::json processes = nlohmann::json::array(), chats = nlohmann::json::array(), tokens = nlohmann::json::array();
  for (const ProcessRecord& p : r.processes)
    processes.push_back({{"id", p.id},
                         {"command", p.command},
                         {"status", to_string(p.status)},
                         {"exit_code", p.exit_code ? nlohmann::json(*p.exit_code) : nlohmann::json()},
                         {"started", p.started},
                         {"ended", p.ended ? nlohmann::json(*p.ended) : nlohmann::json()},
                         {"log_path", p.log_path},
                         {"chat", p.chat}});
  for (const ChatSessionRow& c : r.chats)
    chats.push_back({{"chat_id", c.chat_id}, {"session_id", c.session_id}, {"updated", c.updated}});
  for (const DailyTokens& d : r.tokens)
    tokens.push_back({{"day", d.day},
                      {"requests", d.requests},
                      {"input_tokens", d.tokens.input_tokens},
                      {"output_tokens", d.tokens.output_tokens},
                      {"cache_creation_input_tokens", d.tokens.cache_creation_input_tokens},
                      {"cache_read_input_tokens", d.tokens.cache_read_input_tokens}});
  return {{"processes", processes}, {"chats", chats}, {"tokens", tokens}};
}

MovedRecords records_from_json(const nlohmann::json& v) {
  try {
    MovedRecords r;
    for (const auto& p : v.at("processes")) {
      ProcessRecord rec;
      rec.id = p.at("id").get<std::string>();
      rec.command = p.at("command").get<std::string>();
      rec.status = process_status_from_string(p.at("status").get<std::string>());
      if (!p.at("exit_code").is_null()) rec.exit_code = p.at("exit_code").get<int64_t>();
      rec.started = p.at("started").get<int64_t>();
      if (!p.at("ended").is_null()) rec.ended = p.at("ended").get<int64_t>();
      rec.log_path = p.at("log_path").get<std::string>();
      rec.chat = p.value("chat", "");  // absent from a node before chats were recorded
      r.processes.push_back(std::move(rec));
    }
    for (const auto& c : v.at("chats"))
      r.chats.push_back(
          {c.at("chat_id").get<std::string>(), c.at("session_id").get<std::string>(), c.at("updated").get<int64_t>()});
    for (const auto& t : v.at("tokens")) {
      DailyTokens d;
      d.day = t.at("day").get<std::string>();
      d.requests = t.at("requests").get<uint64_t>();
      d.tokens.input_tokens = t.at("input_tokens").get<uint64_t>();
      d.tokens.output_tokens = t.at("output_tokens").get<uint64_t>();
      d.tokens.cache_creation_input_tokens = t.at("cache_creation_input_tokens").get<uint64_t>();
      d.tokens.cache_read_input_tokens = t.at("cache_read_input_tokens").get<uint64_t>();
      r.tokens.push_back(std::move(d));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("move.json: ") + e.what());
  }
}

}  // namespace agentbox::moves
