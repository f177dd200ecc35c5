"""/openapi.json as Open WebUI reads it: the tools it derives, and calling them the way it does."""
import copy

import pytest

from conftest import text_of, wait_done

EXPECTED_TOOLS = {"run_command", "list_processes", "get_process_status", "send_process_input",
                  "kill_process", "list_files", "read_file", "display_file", "write_file",
                  "replace_file_content", "grep_search", "glob_search",
                  # the assistant in the user's terminal (Open Terminal 0.12.4)
                  "read_user_terminal", "send_user_terminal_input"}
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def resolve_schema(schema, components):
    """Open WebUI's resolve_schema: follows $ref into components, recursing into properties and items."""
    if not schema:
        return {}
    if "$ref" in schema:
        resolved = components
        for part in schema["$ref"].strip("#/").split("/")[1:]:
            resolved = resolved.get(part, {})
        return resolve_schema(resolved, components)
    out = copy.deepcopy(schema)
    if "properties" in out:
        for name, prop in out["properties"].items():
            out["properties"][name] = resolve_schema(prop, components)
    if "items" in out:
        out["items"] = resolve_schema(out["items"], components)
    return out


def tools_from(spec):
    """Open WebUI's convert_openapi_to_tool_payload, plus where each tool lives."""
    tools = {}
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            if not op.get("operationId"):
                continue
            tool = {"name": op["operationId"],
                    "description": op.get("description", op.get("summary", "")),
                    "parameters": {"type": "object", "properties": {}, "required": []},
                    "path": path, "method": method, "in": {}}
            for param in op.get("parameters", []):
                schema = param.get("schema", {})
                description = schema.get("description", "") or param.get("description") or ""
                if isinstance(schema.get("enum"), list):
                    description += f". Possible values: {', '.join(schema['enum'])}"
                prop = {"type": schema.get("type"), "description": description}
                if schema.get("type") == "array" and "items" in schema:
                    prop["items"] = schema["items"]
                tool["parameters"]["properties"][param["name"]] = prop
                tool["in"][param["name"]] = param["in"]
                if param.get("required"):
                    tool["parameters"]["required"].append(param["name"])
            body = op.get("requestBody")
            if body:
                schema = body.get("content", {}).get("application/json", {}).get("schema")
                if schema:
                    resolved = resolve_schema(schema, spec.get("components", {}))
                    if resolved.get("properties"):
                        tool["parameters"]["properties"].update(resolved["properties"])
                        for name in resolved["properties"]:
                            tool["in"].setdefault(name, "body")
                        if "required" in resolved:
                            tool["parameters"]["required"] = sorted(
                                set(tool["parameters"]["required"] + resolved["required"]))
                    elif resolved.get("type") == "array":
                        tool["parameters"] = resolved
            tools[tool["name"]] = tool
    return tools


@pytest.fixture(scope="module")
def spec(daemon):
    with daemon.client(key=None) as c:
        r = c.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


@pytest.fixture(scope="module")
def tools(spec):
    return tools_from(spec)


def test_exactly_the_expected_tools(spec, tools):
    assert set(tools) == EXPECTED_TOOLS
    # Open WebUI iterates every key of a path item as an operation.
    for path, item in spec["paths"].items():
        assert set(item) <= HTTP_METHODS, path
    ids = [op["operationId"] for item in spec["paths"].values() for op in item.values()
           if "operationId" in op]
    assert len(ids) == len(set(ids))


def test_every_parameter_is_typed_and_described(tools):
    for tool in tools.values():
        assert tool["description"].strip(), tool["name"]
        props = tool["parameters"]["properties"]
        for name, prop in props.items():
            assert prop.get("type"), (tool["name"], name, prop)
            assert "$ref" not in repr(prop), (tool["name"], name)
            if prop["type"] == "array":
                assert prop["items"].get("type"), (tool["name"], name)
        for name in tool["parameters"]["required"]:
            assert name in props, (tool["name"], name)


def test_bodies_are_resolved(tools):
    def params(name):
        return tool_params(tools, name)
    assert {"command", "cwd", "env", "wait", "tail"} <= params("run_command")
    assert "command" in tools["run_command"]["parameters"]["required"]
    assert {"id", "wait", "offset", "tail"} <= params("get_process_status")
    assert {"id", "input"} <= params("send_process_input")
    assert {"id", "force"} <= params("kill_process")
    assert {"path", "content"} <= params("write_file")
    assert set(tools["write_file"]["parameters"]["required"]) == {"path", "content"}
    assert {"path", "replacements"} <= params("replace_file_content")
    items = tools["replace_file_content"]["parameters"]["properties"]["replacements"]["items"]
    assert {"target", "replacement", "start_line", "end_line", "allow_multiple"} <= set(items["properties"])
    assert {"path", "start_line", "end_line"} <= params("read_file")
    assert {"path"} <= params("display_file")
    assert {"query", "path", "regex", "case_insensitive", "include", "match_per_line",
            "max_results"} <= params("grep_search")
    assert {"pattern", "path", "exclude", "type", "max_results"} <= params("glob_search")
    assert {"directory"} <= params("list_files")


def tool_params(tools, name):
    return set(tools[name]["parameters"]["properties"])


def test_security_scheme_is_bearer(spec):
    schemes = spec["components"]["securitySchemes"]
    assert any(s.get("type") == "http" and s.get("scheme", "").lower() == "bearer"
               for s in schemes.values())


def call_tool(client, tool, args):
    """Calls a tool the way Open WebUI's execute_tool_server does: path and query parameters
    from the operation, and every argument in the JSON body when the operation has one."""
    path = tool["path"]
    query = {}
    for name, where in tool["in"].items():
        if name in args and args[name] is not None:
            if where == "path":
                path = path.replace("{" + name + "}", str(args[name]))
            elif where == "query":
                value = args[name]
                query[name] = str(value).lower() if isinstance(value, bool) else value
    body = args if any(w == "body" for w in tool["in"].values()) else None
    return client.request(tool["method"].upper(), path, params=query, json=body)


def test_tools_work_when_called_like_open_webui(clients, tools):
    c = clients.user("owui", session="chat-1")
    r = call_tool(c, tools["write_file"], {"path": "hello.py", "content": "print('hi')\n"})
    assert r.status_code == 200, r.text
    r = call_tool(c, tools["run_command"], {"command": "python3 hello.py", "wait": 10, "tail": None})
    assert r.status_code == 200, r.text
    proc = r.json()
    assert text_of(proc) == "hi\r\n"
    r = call_tool(c, tools["get_process_status"], {"id": proc["id"], "offset": None, "wait": None})
    assert r.status_code == 200 and r.json()["status"] == "done"
    r = call_tool(c, tools["read_file"], {"path": "hello.py", "start_line": None, "end_line": None})
    assert r.json()["content"] == "print('hi')\n"
    r = call_tool(c, tools["replace_file_content"], {"path": "hello.py", "replacements": [
        {"target": "hi", "replacement": "bye", "start_line": None, "end_line": None, "allow_multiple": False}]})
    assert r.status_code == 200, r.text
    r = call_tool(c, tools["display_file"], {"path": "hello.py"})
    assert r.json()["exists"] is True
    r = call_tool(c, tools["list_files"], {"directory": None})
    assert [e["name"] for e in r.json()["entries"]] == ["hello.py"]
    r = call_tool(c, tools["grep_search"], {"query": "bye", "path": None, "include": None})
    assert len(r.json()["matches"]) == 1
    r = call_tool(c, tools["glob_search"], {"pattern": "*.py", "path": None})
    assert len(r.json()["matches"]) == 1
    r = call_tool(c, tools["run_command"], {"command": "read -r x; echo got $x", "wait": 0})
    pid = r.json()["id"]
    r = call_tool(c, tools["send_process_input"], {"id": pid, "input": "yes\\n"})
    assert r.status_code == 200, r.text
    assert "got yes" in text_of(wait_done(c, pid))
    r = call_tool(c, tools["run_command"], {"command": "sleep 30", "wait": 0})
    r = call_tool(c, tools["kill_process"], {"id": r.json()["id"], "force": True})
    assert r.json() == {"status": "killed"}
    r = call_tool(c, tools["list_processes"], {})
    assert len(r.json()) == 3
