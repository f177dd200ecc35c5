// http/in_memory_call: a route handler called without a socket, as MCP's tool calls and the
// tests' RouteCaller call them. A synchronous handler answers at once (its exception through
// the table's map), an asynchronous one whenever and from whatever thread it answers, a stream's
// chunks joined; a takeover route is refused; a caller that hangs up tells the handler, and a
// complete response releases what still waits on the writer.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "http/in_memory_call.hpp"
#include "http/response_writer.hpp"
#include "http/router.hpp"

namespace agentbox::http {
namespace {

using namespace std::chrono_literals;

Response marked_map(std::exception_ptr, std::string_view context) {
  return error_response(http::status::misdirected_request, "mapped: " + std::string(context));
}

// Routes req (method and target) and calls it; the reply when done has run by then.
struct Called {
  InMemoryCall call;
  std::shared_ptr<std::promise<InMemoryReply>> promise = std::make_shared<std::promise<InMemoryReply>>();
  std::future<InMemoryReply> future = promise->get_future();
};

Called call(const Router& router, verb method, const std::string& target) {
  Request req;
  req.method = method;
  req.target = target;
  const Route* route = route_in_memory(router, req);
  EXPECT_NE(route, nullptr) << target;
  Called c;
  if (!route) return c;
  c.call = call_in_memory(router, *route, req, "TEST " + target,
                          [p = c.promise](InMemoryReply r) { p->set_value(std::move(r)); });
  return c;
}

TEST(InMemoryCall, ASyncHandlerAnswersAtOnceWithItsPathParamsAndQuery) {
  Router router;
  router.add(verb::get, "/things/{id}", [](const Request& req) {
    return Response::text(req.path_params.at("id") + ":" + req.query_param("n").value_or("-"));
  });
  auto c = call(router, verb::get, "/things/a%20b?n=3");
  ASSERT_EQ(c.future.wait_for(0s), std::future_status::ready) << "answered before call_in_memory returned";
  InMemoryReply r = c.future.get();
  EXPECT_EQ(r.response.status, status::ok);
  EXPECT_EQ(r.response.body, "a b:3");
  EXPECT_FALSE(r.aborted);
}

TEST(InMemoryCall, AnEscapingExceptionIsAnsweredByTheTablesMap) {
  Router router;
  router.map_errors(marked_map);
  router.add(verb::get, "/boom", [](const Request&) -> Response { throw std::runtime_error("boom"); });
  router.add_async(verb::get, "/later-boom",
                   [](const Request&, std::shared_ptr<ResponseWriter>) { throw std::runtime_error("boom"); });
  EXPECT_EQ(call(router, verb::get, "/boom").future.get().response.status, status::misdirected_request);
  InMemoryReply later = call(router, verb::get, "/later-boom").future.get();
  EXPECT_EQ(later.response.status, status::misdirected_request);
  EXPECT_NE(later.response.body.find("mapped: TEST /later-boom"), std::string::npos) << later.response.body;
}

TEST(InMemoryCall, AnAsyncStreamAnsweredFromAnotherThreadArrivesWhole) {
  Router router;
  std::thread answerer;
  router.add_async(verb::get, "/stream", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    answerer = std::thread([w] {
      std::this_thread::sleep_for(20ms);
      w->begin_chunked(Response{});
      w->write_chunk("one ");
      w->write_chunk("two");
      w->end_chunked();
    });
  });
  auto c = call(router, verb::get, "/stream");
  ASSERT_EQ(c.future.wait_for(5s), std::future_status::ready);
  answerer.join();
  InMemoryReply r = c.future.get();
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.response.body, "one two");
  EXPECT_FALSE(r.aborted);
}

TEST(InMemoryCall, AHandlerThatDropsItsWriterUnansweredIs500) {
  Router router;
  router.add_async(verb::get, "/drop", [](const Request&, std::shared_ptr<ResponseWriter>) {});
  EXPECT_EQ(call(router, verb::get, "/drop").future.get().response.status, status::internal_server_error);
}

TEST(InMemoryCall, HangingUpTellsTheHandlerAndHandsOnWhatArrived) {
  Router router;
  auto told = std::make_shared<std::promise<void>>();
  std::shared_ptr<ResponseWriter> kept;  // a long-poll that would wait forever
  router.add_async(verb::get, "/poll", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    w->on_close([told] { told->set_value(); });
    w->begin_chunked(Response{});
    w->write_chunk("so far");
    kept = w;
  });
  auto c = call(router, verb::get, "/poll");
  EXPECT_EQ(c.future.wait_for(50ms), std::future_status::timeout);
  c.call.hang_up();
  ASSERT_EQ(told->get_future().wait_for(0s), std::future_status::ready);
  InMemoryReply r = c.future.get();
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.response.body, "so far");
  EXPECT_FALSE(kept->write_chunk("late"));
  c.call.hang_up();  // again, and after the writer is gone: nothing
  kept.reset();
  c.call.hang_up();
}

TEST(InMemoryCall, ACompleteResponseClosesTheWriterWithoutAnEarlyCloseCallback) {
  Router router;
  bool early = false;
  std::shared_ptr<ResponseWriter> kept;
  router.add_async(verb::get, "/x", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    w->on_close([&] { early = true; });
    kept = w;
  });
  auto c = call(router, verb::get, "/x");
  ASSERT_TRUE(kept->send(Response::text("done")));
  EXPECT_EQ(c.future.get().response.body, "done");
  EXPECT_FALSE(kept->is_open());
  EXPECT_FALSE(early);
}

TEST(InMemoryCall, ATakeoverRouteNeedsAConnection) {
  Router router;
  router.add_takeover(verb::get, "/ws", [](Takeover) { ADD_FAILURE() << "called without a connection"; });
  EXPECT_EQ(call(router, verb::get, "/ws").future.get().response.status, status::not_found);
}

TEST(InMemoryCall, OnlyWhatTheSessionWouldRouteIsFound) {
  Router router;
  router.add(verb::get, "/a", [](const Request&) { return Response::text("a"); });
  Request req;
  std::string why;
  req.method = verb::get;
  req.target = "no-slash";
  EXPECT_EQ(route_in_memory(router, req, &why), nullptr);
  EXPECT_EQ(why, "invalid target");
  req.target = "/b";
  EXPECT_EQ(route_in_memory(router, req, &why), nullptr);
  EXPECT_EQ(why, "no such route");
  req.method = verb::post;
  req.target = "/a";
  EXPECT_EQ(route_in_memory(router, req, &why), nullptr);
  EXPECT_EQ(why, "method not allowed");
}

}  // namespace
}  // namespace agentbox::http
