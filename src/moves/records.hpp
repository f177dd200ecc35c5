#pragma once
// move.json, the records part of a move's archive (api/moves.hpp): the account's
// process records, chat sessions and token usage as the source holds them.
#include <string>

#include <nlohmann/json.hpp>

#include "store/move_store.hpp"

namespace agentbox::moves {

nlohmann::json records_json(const MovedRecords& records);
// Throws Error naming what is missing or of the wrong type.
MovedRecords records_from_json(const nlohmann::json& value);

}  // namespace agentbox::moves
