#pragma once
// /openapi.json: the Part A tool operations as OpenAPI 3.1. Open WebUI turns each operation
// into a model tool (operationId = tool name, description = what the model reads, parameters
// and the resolved JSON body = the tool's arguments), so descriptions are written for a model.
#include <nlohmann/json.hpp>

#include <string_view>

namespace agentbox::api {

nlohmann::json openapi_document(std::string_view version);

}  // namespace agentbox::api
