#pragma once
// "SRC[:DST]" bind specs, shared by `agentbox run --bind/--ro-bind` and the run profile.
#include <string>
#include <string_view>

#include "box/box_spec.hpp"

namespace agentbox {

// "~" and "~/x" become caller_home and caller_home/x (the caller's real home, which the CLI
// determines); other paths are returned unchanged. "~user" is refused.
std::string expand_home(std::string_view path, const std::string& caller_home);

// Parses "SRC[:DST]" (split at the first ':'; DST defaults to SRC). SRC is ~-expanded and
// must be absolute and exist; DST must be absolute and not "/". Both are normalized
// lexically ("/a/./b/" -> "/a/b"; ".." cannot climb above "/"). Errors name the flag:
// `--bind: /nope: No such file or directory` (`--ro-bind` when not writable).
BindMount parse_bind_spec(std::string_view spec, bool writable, const std::string& caller_home);

// The same without the flag name in errors, for callers that add their own context.
BindMount bind_from_spec(std::string_view spec, bool writable, const std::string& caller_home);

}  // namespace agentbox
