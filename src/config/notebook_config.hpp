#pragma once
// The [notebooks] keys of the server config, and [files] preview_timeout (office previews):
// both run a program of the user's in the user's box on the API's behalf.
//
//   [notebooks]
//   per_account = 4        # kernels open at once per account; one more is 429
//   idle_timeout = 3600    # a kernel with no cell running this long ends (seconds)
//   cell_timeout = 300     # a cell running this long is interrupted, the kernel kept (seconds)
//   [files]
//   preview_timeout = 60   # a LibreOffice conversion (preview=true) running this long is stopped
#include <toml++/toml.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace agentbox {

struct NotebookConfig {
  size_t per_account = 4;
  std::chrono::seconds idle_timeout{3600};
  std::chrono::seconds cell_timeout{300};
  std::chrono::seconds preview_timeout{60};  // [files] preview_timeout
};

inline constexpr std::array<std::string_view, 2> kNotebookSections = {"notebooks", "files"};

// Stores one key the walker found under [notebooks] or [files]; false for a key that is not one
// of ours. Throws Error saying what is wrong with the value.
bool apply_notebook_key(NotebookConfig& config, std::string_view key, const toml::node& value);

}  // namespace agentbox
