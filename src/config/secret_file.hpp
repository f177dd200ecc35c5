#pragma once
// A secret kept in a file of its own (the server's API key, the model credential): refused
// unless it is a regular file that we own and nobody else can read, so a mistake in its mode is
// an error at start, not a leak.
#include <optional>
#include <string>

namespace agentbox {

// The file's text without trailing whitespace; nullopt when it does not exist and missing_ok.
// Throws Error naming the path ("readable by others (mode 644); run chmod 600 on it").
std::optional<std::string> read_secret_file(const std::string& path, bool missing_ok);

}  // namespace agentbox
