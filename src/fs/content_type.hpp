#pragma once
// What kind of content a file holds: a Content-Type guessed from the name's extension (for
// /files/view and /files/serve), image formats recognised from their first bytes (for read_file,
// which hands images to the model as bytes), and the text/binary test.
#include <optional>
#include <string_view>

namespace agentbox {

// Content-Type for a file name by its extension (case-insensitive); text types carry
// "; charset=utf-8"; unknown extensions give "application/octet-stream".
std::string_view content_type_for(std::string_view file_name);

// The image MIME type when `head` (the first bytes of a file) starts like a PNG, JPEG, GIF, WebP
// or BMP file.
std::optional<std::string_view> sniff_image(std::string_view head);

// True when `head` (up to the first 8 KiB of a file) has a NUL byte or is not UTF-8.
bool looks_binary(std::string_view head, bool head_is_whole_file);

// How much of a file looks_binary wants to see.
inline constexpr size_t kSniffBytes = 8192;

}  // namespace agentbox
