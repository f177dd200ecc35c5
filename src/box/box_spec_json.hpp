#pragma once
// BoxSpec and SpawnRequest ⇄ JSON, for the spec message to agentbox-init and for stored rows.
#include <nlohmann/json.hpp>

#include "box/box_spec.hpp"

namespace agentbox {

void to_json(nlohmann::json& j, const BindMount& b);
void from_json(const nlohmann::json& j, BindMount& b);
void to_json(nlohmann::json& j, const Limits& l);
void from_json(const nlohmann::json& j, Limits& l);
void to_json(nlohmann::json& j, const BoxSpec& s);
void from_json(const nlohmann::json& j, BoxSpec& s);
void to_json(nlohmann::json& j, const SpawnRequest& r);
void from_json(const nlohmann::json& j, SpawnRequest& r);

}  // namespace agentbox
