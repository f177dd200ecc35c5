#include "cli/config_check.hpp"

#include <iostream>

#include "config/server_config.hpp"

namespace agentbox::cli {

int config_check(const std::string& path) {
  auto problems = validate_config_file(path);
  for (const auto& p : problems) std::cerr << p << "\n";
  if (!problems.empty()) return 1;
  ServerConfig config;
  apply_config_file(config, path);
  for (const std::string& warning : config_warnings(config)) std::cout << "warning: " << warning << "\n";
  std::cout << path << ": ok\n";
  return 0;
}

}  // namespace agentbox::cli
