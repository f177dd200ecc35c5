#pragma once
// One HTTP message passed on from one connection to another as it arrives: Beast's buffer_body
// relay, written once for the egress proxy, the inference gateway and /proxy (each in both
// directions). The caller has read the head with `parser` and edited it (hop-by-hop fields
// gone, a credential swapped, a target rewritten); `serializer` is of that same message. The
// relay writes the head, then the body a piece at a time: the parser fills the caller's fixed
// buffer, the serializer writes it out framed as the message says (Content-Length, chunked, or
// up to the connection's end), until both the message read and the message written are done.
// A message whose head was all of it (a request without a body; the answer to a HEAD, a 1xx,
// 204 or 304) goes as its head alone, whatever its framing fields announce.
// Reads take what has arrived (read_some, not read, which would wait for a full buffer), so a
// body streams as it comes, and memory is the buffer whatever the body's size.
//
// Timeouts and accounting are the caller's: `watch(step, piece)` runs before each read
// (RelayStep::read, no piece) and each write (RelayStep::write, the body bytes about to go),
// where the caller arms its deadlines, notes progress or reads what passes (token counts). The
// relay ends at the first error of either side and says which; what to answer then (a 502, a
// cut connection) is the caller's too.
//
//   async_relay_message(client, client_buffer, parser, upstream, serializer,
//                       {.buffer = buffer}, watch, [self](RelayEnd end) { ... });
#include <boost/asio/compose.hpp>
#include <boost/assert.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace agentbox::net {

enum class RelayStep { read, write };

struct RelayEnd {
  boost::system::error_code ec;        // the first error; none when the whole message went
  RelayStep failed = RelayStep::read;  // the side ec came from (with ec only)
  std::uint64_t bytes = 0;             // body bytes read, and passed on unless a write failed
};

struct RelayOptions {
  std::span<char> buffer;      // each piece passes through here; its size bounds one read
  std::string_view held = {};  // a body the caller read whole itself (the parser is done):
                               // written as the one piece, its bytes counted
  bool head_first = false;     // the head goes before any of the body is read (else with the
                               // first piece): for a peer that answers a head alone (Expect:
                               // 100-continue passed on; an answer before the whole upload)
};

namespace detail {

template <class From, class FromBuffer, class To, bool isRequest, class Watch>
class RelayMessageOp {
 public:
  using Parser = boost::beast::http::parser<isRequest, boost::beast::http::buffer_body>;
  using Serializer = boost::beast::http::serializer<isRequest, boost::beast::http::buffer_body>;

  RelayMessageOp(From& from, FromBuffer& from_buffer, Parser& parser, To& to, Serializer& serializer,
                 RelayOptions options, Watch watch)
      : from_(from),
        from_buffer_(from_buffer),
        parser_(parser),
        to_(to),
        serializer_(serializer),
        options_(options),
        watch_(std::move(watch)) {}

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec = {}, std::size_t = 0) {
    namespace http = boost::beast::http;
    if (ec == http::error::need_buffer) ec = {};  // the buffer is full (read) or drained (write)
    auto& body = parser_.get().body();
    switch (state_) {
      case State::starting:
        if (parser_.is_done() && options_.held.empty()) {
          state_ = State::writing_head;
          watch_(RelayStep::write, std::string_view());
          return http::async_write_header(to_, serializer_, std::move(self));
        }
        if (options_.head_first) {
          state_ = State::writing_head_first;
          watch_(RelayStep::write, std::string_view());
          return http::async_write_header(to_, serializer_, std::move(self));
        }
        return next(self);
      case State::writing_head_first:
        if (ec) return self.complete({ec, RelayStep::write, bytes_});
        return next(self);
      case State::reading: {
        if (ec) return self.complete({ec, RelayStep::read, bytes_});
        const std::size_t used = options_.buffer.size() - body.size;
        // Framing only, or the message's end: next() writes what remains. (A piece of no bytes
        // would not do for the end: the serializer would end a chunked body twice.)
        if (used == 0) return next(self);
        bytes_ += used;
        body.data = options_.buffer.data();
        body.size = used;
        body.more = !parser_.is_done();
        return write(self, {options_.buffer.data(), used});
      }
      case State::writing:
        if (ec) return self.complete({ec, RelayStep::write, bytes_});
        if (parser_.is_done() && serializer_.is_done()) return self.complete({{}, RelayStep::write, bytes_});
        return next(self);
      case State::writing_head: return self.complete({ec, RelayStep::write, bytes_});
    }
  }

 private:
  enum class State { starting, reading, writing, writing_head, writing_head_first };

  // Reads the next piece, or, once the message read is complete, writes what remains of it.
  template <class Self>
  void next(Self& self) {
    namespace http = boost::beast::http;
    auto& body = parser_.get().body();
    if (parser_.is_done()) {
      const std::string_view last = held_sent_ ? std::string_view() : options_.held;
      held_sent_ = true;
      bytes_ += last.size();
      body.data = last.empty() ? nullptr : const_cast<char*>(last.data());  // only ever read
      body.size = last.size();
      body.more = false;
      return write(self, last);
    }
    BOOST_ASSERT(!options_.buffer.empty());  // else every read would find no room, forever
    state_ = State::reading;
    body.data = options_.buffer.data();
    body.size = options_.buffer.size();
    watch_(RelayStep::read, std::string_view());
    http::async_read_some(from_, from_buffer_, parser_, std::move(self));
  }

  template <class Self>
  void write(Self& self, std::string_view piece) {
    state_ = State::writing;
    watch_(RelayStep::write, piece);
    boost::beast::http::async_write(to_, serializer_, std::move(self));
  }

  From& from_;
  FromBuffer& from_buffer_;
  Parser& parser_;
  To& to_;
  Serializer& serializer_;
  RelayOptions options_;
  Watch watch_;
  State state_ = State::starting;
  bool held_sent_ = false;
  std::uint64_t bytes_ = 0;
};

}  // namespace detail

// Relays the message `parser` has read the head of, from `from` (more of it arrives in
// from_buffer first) to `to`. The parser, serializer, streams, buffers and the message must
// outlive the operation; done(RelayEnd) runs through the handler's executor as usual.
template <class From, class FromBuffer, class To, bool isRequest, class Watch, class Done>
void async_relay_message(From& from, FromBuffer& from_buffer,
                         boost::beast::http::parser<isRequest, boost::beast::http::buffer_body>& parser, To& to,
                         boost::beast::http::serializer<isRequest, boost::beast::http::buffer_body>& serializer,
                         RelayOptions options, Watch watch, Done&& done) {
  using Op = detail::RelayMessageOp<From, FromBuffer, To, isRequest, Watch>;
  boost::asio::async_compose<Done, void(RelayEnd)>(
      Op(from, from_buffer, parser, to, serializer, options, std::move(watch)), done, from, to);
}

}  // namespace agentbox::net
