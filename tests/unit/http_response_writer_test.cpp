// ResponseWriter, the handle an async handler answers through, against a RecordingSession
// (support/route_caller.hpp) in place of a connection: one response per request in the order
// the header gives, exceptions through the route table's own ErrorMap, a writer dropped
// unanswered is a 500 (mid-stream: a cut connection), and a closed connection tells the handler
// once and refuses everything after.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "support/route_caller.hpp"

namespace agentbox::http {
namespace {

using namespace std::chrono_literals;
using testing::RecordingSession;
using testing::RouteReply;

// A table's map that says it was the one asked.
Response marked_map(std::exception_ptr, std::string_view context) {
  return error_response(http::status::misdirected_request, "mapped: " + std::string(context));
}

struct WriterTest : ::testing::Test {
  std::shared_ptr<RecordingSession> session = std::make_shared<RecordingSession>();
  std::shared_ptr<ResponseWriter> writer = std::make_shared<ResponseWriter>(session, "GET /x", marked_map);

  RouteReply reply() { return session->wait(0ms); }
};

TEST_F(WriterTest, OneResponseAndNothingAfterIt) {
  EXPECT_TRUE(writer->is_open());
  EXPECT_TRUE(writer->send(Response::text("hello")));
  EXPECT_FALSE(writer->is_open());
  EXPECT_FALSE(writer->send(Response::text("again")));
  EXPECT_FALSE(writer->fail(std::make_exception_ptr(std::runtime_error("late"))));
  EXPECT_FALSE(writer->begin_chunked(Response{}));
  RouteReply r = reply();
  ASSERT_TRUE(r.answered);
  EXPECT_EQ(r.code(), 200u);
  EXPECT_EQ(r.body, "hello");
}

TEST_F(WriterTest, AFailureIsAnsweredByTheTablesMap) {
  EXPECT_TRUE(writer->fail(std::make_exception_ptr(std::runtime_error("boom"))));
  RouteReply r = reply();
  EXPECT_EQ(r.status, http::status::misdirected_request);
  EXPECT_EQ(r.detail(), "mapped: GET /x");
}

TEST_F(WriterTest, ChunksOnlyBetweenTheirHeadAndTheirEnd) {
  EXPECT_FALSE(writer->write_chunk("early")) << "no chunk before the head";
  Response head;
  head.headers.set(http::field::content_type, "text/event-stream");
  EXPECT_TRUE(writer->begin_chunked(std::move(head)));
  EXPECT_FALSE(writer->send(Response::text("x"))) << "a stream is not also a whole response";
  EXPECT_TRUE(writer->write_chunk("one "));
  EXPECT_TRUE(writer->write_chunk("")) << "an empty chunk is skipped, not an end";
  EXPECT_FALSE(reply().answered);
  EXPECT_TRUE(writer->write_chunk("two"));
  EXPECT_TRUE(writer->end_chunked());
  EXPECT_FALSE(writer->write_chunk("after"));
  RouteReply r = reply();
  ASSERT_TRUE(r.answered);
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.headers[http::field::content_type], "text/event-stream");
  EXPECT_EQ(r.body, "one two");
}

TEST_F(WriterTest, AFileIsSentFromItsOffsetForItsLength) {
  UniqueFd fd(::memfd_create("writer-test", MFD_CLOEXEC));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::write(fd.get(), "0123456789", 10), 10);
  EXPECT_TRUE(writer->send_file(Response{}, std::move(fd), 3, 4));
  EXPECT_EQ(reply().body, "3456");
}

TEST_F(WriterTest, AWriterDroppedUnansweredIs500) {
  writer.reset();
  RouteReply r = reply();
  ASSERT_TRUE(r.answered);
  EXPECT_EQ(r.code(), 500u);
  EXPECT_EQ(r.detail(), "Internal Server Error");
}

TEST_F(WriterTest, AWriterDroppedMidStreamCutsTheConnection) {
  ASSERT_TRUE(writer->begin_chunked(Response{}));
  ASSERT_TRUE(writer->write_chunk("part"));
  writer.reset();
  RouteReply r = reply();
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.body, "part");
}

TEST_F(WriterTest, AClosedConnectionTellsTheHandlerOnceAndRefusesWhatFollows) {
  int told = 0;
  writer->on_close([&] { ++told; });
  writer->notify_closed();
  writer->notify_closed();
  EXPECT_EQ(told, 1);
  EXPECT_FALSE(writer->is_open());
  EXPECT_FALSE(writer->send(Response::text("too late")));
  EXPECT_FALSE(reply().answered);
  int late = 0;
  writer->on_close([&] { ++late; });
  EXPECT_EQ(late, 1) << "registered after the close: told at once";
}

TEST_F(WriterTest, AConnectionClosedAfterTheResponseIsNoEarlyClose) {
  int told = 0;
  writer->on_close([&] { ++told; });
  ASSERT_TRUE(writer->send(Response::text("done")));
  writer->notify_closed();
  EXPECT_EQ(told, 0);
}

TEST_F(WriterTest, ASessionAlreadyGoneTakesNothing) {
  session.reset();
  EXPECT_FALSE(writer->send(Response::text("nobody")));
}

}  // namespace
}  // namespace agentbox::http
