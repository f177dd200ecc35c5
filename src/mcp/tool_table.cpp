#include "mcp/tool_table.hpp"

#include <string_view>

namespace agentbox::mcp {

namespace {

using nlohmann::json;

constexpr std::string_view kComponents = "#/components/schemas/";

// $ref "#/components/schemas/X" → "#/$defs/X", collecting each X (and what it refers to) into defs.
void rewrite_refs(json& schema, const json& components, json& defs) {
  if (schema.is_object()) {
    if (auto it = schema.find("$ref"); it != schema.end() && it->is_string()) {
      std::string ref = *it;
      if (ref.rfind(kComponents, 0) == 0) {
        std::string name = ref.substr(kComponents.size());
        *it = "#/$defs/" + name;
        if (!defs.contains(name) && components.contains(name)) {
          defs[name] = json::object();  // placed first: a cycle stops here
          json copy = components[name];
          rewrite_refs(copy, components, defs);
          defs[name] = std::move(copy);
        }
      }
    }
    for (auto& [key, value] : schema.items()) rewrite_refs(value, components, defs);
  } else if (schema.is_array()) {
    for (auto& value : schema) rewrite_refs(value, components, defs);
  }
}

http::verb verb_of(std::string_view method) {
  if (method == "post") return http::verb::post;
  if (method == "put") return http::verb::put;
  if (method == "delete") return http::verb::delete_;
  return http::verb::get;
}

Tool tool_of(const std::string& pattern, const std::string& method, const json& op, const json& components) {
  Tool tool;
  tool.name = op.value("operationId", "");
  tool.title = op.value("summary", "");
  tool.description = op.value("description", "");
  tool.method = verb_of(method);
  tool.pattern = pattern;
  json properties = json::object();
  json required = json::array();
  json defs = json::object();
  const json parameters = op.value("parameters", json::array());
  for (const json& p : parameters) {
    std::string name = p.value("name", "");
    json schema = p.value("schema", json::object());
    if (p.contains("description")) schema["description"] = p["description"];
    rewrite_refs(schema, components, defs);
    properties[name] = std::move(schema);
    if (p.value("required", false)) required.push_back(name);
    (p.value("in", "") == "path" ? tool.path_args : tool.query_args).push_back(name);
  }
  if (op.contains("requestBody")) {
    json body = op["requestBody"]["content"]["application/json"]["schema"];
    rewrite_refs(body, components, defs);
    // The body's object: its schema, or the one its $ref names.
    json resolved = body;
    if (body.contains("$ref")) {
      std::string name = body["$ref"].get<std::string>().substr(std::string_view("#/$defs/").size());
      resolved = defs[name];
      // Inlined here, so drop its own $defs entry unless something else refers to it.
      defs.erase(name);
    }
    const json body_properties = resolved.value("properties", json::object());
    for (auto it = body_properties.begin(); it != body_properties.end(); ++it) {
      properties[it.key()] = it.value();
      tool.body_args.push_back(it.key());
    }
    const json body_required = resolved.value("required", json::array());
    for (const json& name : body_required) required.push_back(name);
  }
  json schema = {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                 {"type", "object"},
                 {"properties", std::move(properties)},
                 {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = std::move(required);
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  tool.input_schema = std::move(schema);
  return tool;
}

// The MCP default of run_command's wait: filled in by call_tool, announced in the schema.
void set_default_wait(Tool& tool) {
  if (tool.name != "run_command" || !tool.input_schema["properties"].contains("wait")) return;
  json& wait = tool.input_schema["properties"]["wait"];
  wait["default"] = kRunCommandDefaultWait;
  wait["description"] = wait.value("description", "") + " Default " + std::to_string(kRunCommandDefaultWait) +
                        " (0 answers at once with the id to poll).";
  tool.defaults["wait"] = kRunCommandDefaultWait;
}

}  // namespace

std::vector<Tool> tools_of(const json& openapi) {
  std::vector<Tool> tools;
  const json components =
      openapi.contains("components") ? openapi["components"].value("schemas", json::object()) : json::object();
  const json paths = openapi.value("paths", json::object());
  for (auto p = paths.begin(); p != paths.end(); ++p)
    for (auto m = p.value().begin(); m != p.value().end(); ++m)
      if (m.value().contains("operationId")) tools.push_back(tool_of(p.key(), m.key(), m.value(), components));
  for (Tool& tool : tools) set_default_wait(tool);
  return tools;
}

json tool_json(const Tool& tool) {
  return {{"name", tool.name},
          {"title", tool.title},
          {"description", tool.description},
          {"inputSchema", tool.input_schema}};
}

}  // namespace agentbox::mcp
