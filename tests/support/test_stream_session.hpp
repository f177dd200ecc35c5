#pragma once
// http::Session over Beast's in-memory test::stream (a stream with no kernel socket behind it):
// what http/session_stream.hpp says for a TCP socket, said for it. Include this header, then
// "http/session_impl.hpp", and make Session<boost::beast::test::stream>.
//
// test::stream has no half close and no readiness wait, so: a timeout's "shut the receiving
// side" is close_remote() (the pending read sees the end at once), "shut the sending side" is
// close() (the peer reads what was written, then the end); the disconnect watch of async
// handlers does not run; file bodies are read and written (no sendfile); takeover routes answer
// 500. Writes never block, so the write deadline cannot pass.
#include <boost/beast/_experimental/test/stream.hpp>

#include <string>

#include "http/session_stream.hpp"

namespace agentbox::http {

template <>
struct SessionStream<boost::beast::test::stream> {
  using stream = boost::beast::test::stream;

  static constexpr bool can_take_over = false;
  static constexpr bool has_sendfile = false;
  static constexpr bool can_watch_reads = false;

  static void prepare(stream&, std::string& remote, std::string& local) {
    remote = "192.0.2.7:40000";  // documentation addresses: nothing real
    local = "192.0.2.1:8000";
  }
  static void cancel(stream&) {}  // nothing waits that a timeout must not end another way
  static void shutdown_receive(stream& s) { s.close_remote(); }
  static void shutdown_send(stream& s) { s.close(); }
  static void close(stream& s) { s.close(); }
};

}  // namespace agentbox::http
