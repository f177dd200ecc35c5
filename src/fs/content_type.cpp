#include "fs/content_type.hpp"

#include <strings.h>

#include "util/utf8.hpp"

namespace agentbox {
namespace {

struct ExtensionType {
  std::string_view ext;
  std::string_view type;
};

constexpr ExtensionType kExtensionTypes[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"log", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"tsv", "text/tab-separated-values; charset=utf-8"},
    {"xml", "application/xml"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"toml", "application/toml"},
    {"py", "text/x-python; charset=utf-8"},
    {"sh", "text/x-shellscript; charset=utf-8"},
    {"c", "text/x-c; charset=utf-8"},
    {"h", "text/x-c; charset=utf-8"},
    {"cpp", "text/x-c++; charset=utf-8"},
    {"hpp", "text/x-c++; charset=utf-8"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"bmp", "image/bmp"},
    {"ico", "image/vnd.microsoft.icon"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"wasm", "application/wasm"},
    {"mp3", "audio/mpeg"},
    {"wav", "audio/wav"},
    {"ogg", "audio/ogg"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
};

struct Magic {
  std::string_view prefix;
  std::string_view type;
};

constexpr Magic kImageMagic[] = {
    {"\x89PNG\r\n\x1a\n", "image/png"},
    {"\xFF\xD8\xFF", "image/jpeg"},
    {"GIF87a", "image/gif"},
    {"GIF89a", "image/gif"},
    {"BM", "image/bmp"},
};

}  // namespace

std::string_view content_type_for(std::string_view file_name) {
  size_t slash = file_name.rfind('/');
  if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
  size_t dot = file_name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return "application/octet-stream";
  std::string_view ext = file_name.substr(dot + 1);
  for (const auto& e : kExtensionTypes)
    if (e.ext.size() == ext.size() && ::strncasecmp(e.ext.data(), ext.data(), ext.size()) == 0) return e.type;
  return "application/octet-stream";
}

std::optional<std::string_view> sniff_image(std::string_view head) {
  for (const auto& m : kImageMagic)
    if (head.starts_with(m.prefix)) return m.type;
  // WebP: "RIFF" <size:4> "WEBP".
  if (head.size() >= 12 && head.starts_with("RIFF") && head.substr(8, 4) == "WEBP") return "image/webp";
  return std::nullopt;
}

bool looks_binary(std::string_view head, bool head_is_whole_file) {
  bool cut = !head_is_whole_file;
  if (head.size() > kSniffBytes) {
    head = head.substr(0, kSniffBytes);
    cut = true;
  }
  if (head.find('\0') != std::string_view::npos) return true;
  return !is_valid_utf8(head, cut);
}

}  // namespace agentbox
