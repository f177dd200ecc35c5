#include "daemon/serve.hpp"

#include "daemon/daemon.hpp"
#include "daemon/startup.hpp"

namespace agentbox::daemon {

int serve(const ServeOptions& options) {
  ServerConfig config = load_config(options);
  Daemon daemon(std::move(config), options);
  daemon.run();
  daemon.stop();
  return 0;
}

}  // namespace agentbox::daemon
