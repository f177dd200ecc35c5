#pragma once
// MCP over stdio (the spec's stdio transport, `agentbox mcp`): one JSON-RPC message a line on
// the input, one a line on the output, nothing else on the output (logs go to stderr). The
// methods are the HTTP transport's (mcp/dispatch.hpp) for one caller, fixed when the server is
// made; there are no sessions: the connection is the session. A line that is not JSON is
// answered -32700 and the server reads on; a line over kMessageLimit bytes -32600. End of
// input ends serve() once every request read has been answered.
//
// Runs on: serve() on the calling thread; answers are written from whatever thread the routes
// answer on (one mutex around the output), and are dropped once the server is gone.
#include <memory>
#include <string_view>

#include "mcp/dispatch.hpp"

namespace agentbox::mcp {

class StdioServer {
 public:
  // in, out: the descriptors the messages come and go on (not owned).
  StdioServer(std::shared_ptr<McpServer> server, CallerContext caller, int in, int out);
  ~StdioServer();  // later answers are dropped
  StdioServer(const StdioServer&) = delete;
  StdioServer& operator=(const StdioServer&) = delete;

  // Reads and answers messages until the input ends and its requests are answered (true), or
  // stop_fd becomes readable (false).
  bool serve(int stop_fd);

 private:
  struct Output;
  void on_line(std::string_view line);
  bool drain(int stop_fd);

  std::shared_ptr<McpServer> server_;
  CallerContext caller_;
  int in_;
  std::shared_ptr<Output> out_;
};

}  // namespace agentbox::mcp
