// mcp/stdio_server: MCP over stdio on pipes, with the real dispatcher and tool table and a stand-in
// for the REST route a tool mirrors. One message a line each way; bad lines answered and the
// server reads on; end of input and the stop descriptor end serve().
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "api/openapi.hpp"
#include "http/response.hpp"
#include "mcp/dispatch.hpp"
#include "mcp/jsonrpc.hpp"
#include "mcp/mcp_routes.hpp"
#include "mcp/stdio_server.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::mcp {
namespace {

using nlohmann::json;

// POST /execute (run_command) answers the command it was given and the caller it came from.
std::shared_ptr<McpServer> fake_server() {
  auto server = std::make_shared<McpServer>();
  server->routes.add(http::verb::post, "/execute", [](const http::Request& req) {
    json body = json::parse(req.body);
    return http::Response::json({{"status", "done"},
                                 {"exit_code", 0},
                                 {"user", std::string(req.header("X-User-Id").value_or(""))},
                                 {"output", json::array({{{"type", "output"}, {"data", body["command"]}}})}});
  });
  server->tools = tools_of(api::openapi_document("test"));
  server->poll = server->find("get_process_status");
  server->version = "test";
  return server;
}

struct Pipes {
  UniqueFd in_read, in_write, out_read, out_write;
  Pipes() {
    int a[2], b[2];
    EXPECT_EQ(::pipe2(a, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(b, O_CLOEXEC), 0);
    in_read.reset(a[0]);
    in_write.reset(a[1]);
    out_read.reset(b[0]);
    out_write.reset(b[1]);
  }
};

// Everything the server wrote, as lines, once it has returned.
std::vector<json> lines_of(int fd) {
  std::string all;
  char buf[65536];
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 0) > 0) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  std::vector<json> out;
  size_t at = 0;
  for (size_t nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1)
    out.push_back(json::parse(all.substr(at, nl - at)));
  EXPECT_EQ(at, all.size()) << "a partial line on the output";
  return out;
}

CallerContext me() {
  CallerContext c;
  c.headers.set("X-User-Id", "me");
  return c;
}

TEST(McpStdioServer, EachLineIsAnsweredInOrderAndABadLineDoesNotEndIt) {
  Pipes p;
  write_all(
      p.in_write.get(),
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\n"
      "{not json\r\n"
      R"([{"jsonrpc":"2.0","id":9,"method":"ping"}])"
      "\n\n"
      R"({"jsonrpc":"2.0","id":"two","method":"no/such"})"
      "\r\n"
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo hi"}}})"
      "\n");
  p.in_write.reset();
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  StdioServer server(fake_server(), me(), p.in_read.get(), p.out_write.get());
  EXPECT_TRUE(server.serve(stop.get()));  // end of input
  std::vector<json> got = lines_of(p.out_read.get());
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0]["id"], 1);
  EXPECT_EQ(got[0]["result"]["protocolVersion"], "2025-06-18");
  EXPECT_TRUE(got[1]["id"].is_null());
  EXPECT_EQ(got[1]["error"]["code"], kParseError);
  EXPECT_EQ(got[2]["error"]["code"], kInvalidRequest);  // a batch: not one message
  EXPECT_EQ(got[3]["id"], "two");
  EXPECT_EQ(got[3]["error"]["code"], kMethodNotFound);
  EXPECT_EQ(got[4]["id"], 3);
  const json& done = got[4]["result"]["structuredContent"];
  EXPECT_EQ(done["output"][0]["data"], "echo hi");
  EXPECT_EQ(done["user"], "me");  // the route saw the stdio caller's user
}

TEST(McpStdioServer, AMessageSplitAcrossWritesIsOneMessageAndTheLastNeedsNoNewline) {
  Pipes p;
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  std::thread writer([&] {
    write_all(p.in_write.get(), R"({"jsonrpc":"2.0","id":1,)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    write_all(p.in_write.get(), R"("method":"ping"})"
                                "\n"
                                R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
    p.in_write.reset();
  });
  StdioServer server(fake_server(), me(), p.in_read.get(), p.out_write.get());
  EXPECT_TRUE(server.serve(stop.get()));
  writer.join();
  std::vector<json> got = lines_of(p.out_read.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["id"], 1);
  EXPECT_EQ(got[0]["result"], json::object());
  EXPECT_EQ(got[1]["id"], 2);
}

TEST(McpStdioServer, TheModernEraIsAnsweredWithItsRevisionFromMeta) {
  Pipes p;
  write_all(
      p.in_write.get(),
      R"({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})"
      "\n");
  p.in_write.reset();
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  StdioServer server(fake_server(), me(), p.in_read.get(), p.out_write.get());
  EXPECT_TRUE(server.serve(stop.get()));
  std::vector<json> got = lines_of(p.out_read.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["result"]["supportedVersions"], json::array({"2026-07-28"}));
  EXPECT_EQ(got[0]["result"]["resultType"], "complete");
}

TEST(McpStdioServer, ALineOverTheLimitIsRefusedOnceAndTheNextIsAnswered) {
  Pipes p;
  ::fcntl(p.out_write.get(), F_SETPIPE_SZ, 1 << 20);
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  std::thread writer([&] {
    std::string big(kMessageLimit + 4096, 'x');
    write_all(p.in_write.get(), big);
    write_all(p.in_write.get(),
              "\n"
              R"({"jsonrpc":"2.0","id":7,"method":"ping"})"
              "\n");
    p.in_write.reset();
  });
  StdioServer server(fake_server(), me(), p.in_read.get(), p.out_write.get());
  EXPECT_TRUE(server.serve(stop.get()));
  writer.join();
  std::vector<json> got = lines_of(p.out_read.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["error"]["code"], kInvalidRequest);
  EXPECT_EQ(got[1]["id"], 7);
}

TEST(McpStdioServer, EndOfInputWaitsForTheAnswersOfRequestsAlreadyRead) {
  // `printf '...' | agentbox mcp`: the input ends before the command does.
  auto server = std::make_shared<McpServer>();
  std::thread later;
  server->routes.add_async(http::verb::post, "/execute",
                           [&later](const http::Request&, std::shared_ptr<http::ResponseWriter> writer) {
                             later = std::thread([writer] {
                               std::this_thread::sleep_for(std::chrono::milliseconds(200));
                               writer->send(http::Response::json({{"status", "done"}, {"exit_code", 0}}));
                             });
                           });
  server->tools = tools_of(api::openapi_document("test"));
  server->version = "test";
  Pipes p;
  write_all(
      p.in_write.get(),
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"x"}}})"
      "\n");
  p.in_write.reset();
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  {
    StdioServer stdio(server, me(), p.in_read.get(), p.out_write.get());
    EXPECT_TRUE(stdio.serve(stop.get()));
  }
  later.join();
  std::vector<json> got = lines_of(p.out_read.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["id"], 7);
  EXPECT_EQ(got[0]["result"]["structuredContent"]["exit_code"], 0);
}

TEST(McpStdioServer, TheStopDescriptorEndsServeWhileTheInputIsOpen) {
  Pipes p;
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t one = 1;
    EXPECT_EQ(::write(stop.get(), &one, sizeof one), 8);
  });
  StdioServer server(fake_server(), me(), p.in_read.get(), p.out_write.get());
  EXPECT_FALSE(server.serve(stop.get()));
  stopper.join();
}

}  // namespace
}  // namespace agentbox::mcp
