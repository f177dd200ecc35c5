#include "config/bind_spec.hpp"

#include <sys/stat.h>

#include <filesystem>

#include "util/error.hpp"

namespace agentbox {
namespace {

// "/a/./b/../c/" -> "/a/c". Lexical only: the host path is resolved by the kernel at mount
// time, and inside the box there is nothing to resolve against yet.
std::string normalize(const std::string& path) {
  std::string out = std::filesystem::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

std::string expand_home(std::string_view path, const std::string& caller_home) {
  if (path.empty() || path.front() != '~') return std::string(path);
  if (path.size() > 1 && path[1] != '/')
    throw Error(std::string(path) + ": only ~ and ~/ are expanded (the caller's own home)");
  if (caller_home.empty() || caller_home.front() != '/')
    throw Error(std::string(path) + ": the caller's home directory is unknown");
  return caller_home + std::string(path.substr(1));
}

BindMount bind_from_spec(std::string_view spec, bool writable, const std::string& caller_home) {
  if (spec.empty()) throw Error("empty bind spec (expected SRC[:DST])");
  size_t colon = spec.find(':');
  std::string_view src_text = spec.substr(0, colon);
  std::string source = expand_home(src_text, caller_home);
  if (source.empty() || source.front() != '/')
    throw Error(std::string(src_text) + ": source must be an absolute path (or start with ~/)");

  std::string target = source;
  if (colon != std::string_view::npos) {
    target = std::string(spec.substr(colon + 1));
    if (target.empty() || target.front() != '/')
      throw Error("\"" + target + "\": destination must be an absolute path inside the box");
  }

  BindMount bind{normalize(source), normalize(target), writable};
  if (bind.target == "/") throw Error(std::string(spec) + ": cannot bind over the box's /");
  struct stat st;
  if (::stat(bind.source.c_str(), &st) != 0) throw sys_error(bind.source);
  return bind;
}

BindMount parse_bind_spec(std::string_view spec, bool writable, const std::string& caller_home) {
  try {
    return bind_from_spec(spec, writable, caller_home);
  } catch (const Error& e) {
    throw e.wrap(writable ? "--bind" : "--ro-bind");
  }
}

}  // namespace agentbox
