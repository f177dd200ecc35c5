// The splice relay between two TCP connections: bytes both ways intact, a half-close passed
// on, and the ends (idle timeout, a reset, stop) closing both sides.
#include "net/splice_relay.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <random>
#include <thread>

namespace agentbox::net {
namespace {

using boost::asio::ip::tcp;
using namespace std::chrono_literals;

class SpliceRelayTest : public ::testing::Test {
 protected:
  SpliceRelayTest() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~SpliceRelayTest() override {
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // A connected pair: the test's blocking end and the relay's end.
  std::pair<tcp::socket, tcp::socket> connected_pair() {
    tcp::acceptor acceptor(io_, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket outside(io_);
    outside.connect(acceptor.local_endpoint());
    tcp::socket inside = acceptor.accept();
    return {std::move(outside), std::move(inside)};
  }

  // Starts a relay between two fresh pairs; returns the test's two ends.
  std::pair<tcp::socket, tcp::socket> relay(SpliceRelay::Options options) {
    auto [c1, a] = connected_pair();
    auto [c2, b] = connected_pair();
    relay_ = SpliceRelay::start(std::move(a), std::move(b), options,
                                [this](const SpliceRelay::Result& r) { result_.set_value(r); });
    return {std::move(c1), std::move(c2)};
  }

  SpliceRelay::Result result() {
    auto f = result_.get_future();
    EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
    return f.get();
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  std::shared_ptr<SpliceRelay> relay_;
  std::promise<SpliceRelay::Result> result_;
};

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen());
  return s;
}

std::string read_to_eof(tcp::socket& s) {
  std::string out;
  char buf[65536];
  boost::system::error_code ec;
  for (;;) {
    size_t n = s.read_some(boost::asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

TEST_F(SpliceRelayTest, RelaysBothWaysIntactAndPassesAHalfCloseOn) {
  auto pair = relay({});
  tcp::socket& c1 = pair.first;  // lambdas capture references: clang 14 cannot capture bindings
  tcp::socket& c2 = pair.second;
  const std::string up = random_bytes(8 << 20, 1), down = random_bytes(1 << 20, 2);
  // Both directions at once: a relay that served one side at a time would deadlock here,
  // with both senders' buffers full.
  std::thread writer1([&] {
    boost::asio::write(c1, boost::asio::buffer(up));
    c1.shutdown(tcp::socket::shutdown_send);
  });
  std::thread writer2([&] { boost::asio::write(c2, boost::asio::buffer(down)); });
  std::string got_up = read_to_eof(c2);  // ends at c1's half-close, passed on
  writer2.join();
  writer1.join();
  EXPECT_TRUE(got_up == up) << got_up.size();
  // c2 can still answer after c1 stopped sending: the other direction is open.
  boost::asio::write(c2, boost::asio::buffer(std::string("after")));
  c2.shutdown(tcp::socket::shutdown_send);
  std::string got_down = read_to_eof(c1);
  EXPECT_TRUE(got_down == down + "after") << got_down.size();
  SpliceRelay::Result r = result();
  EXPECT_EQ(r.ended, "closed");
  EXPECT_EQ(r.a_to_b, up.size());
  EXPECT_EQ(r.b_to_a, down.size() + 5);
}

TEST_F(SpliceRelayTest, AnIdleTunnelEndsAndBothSidesSeeIt) {
  auto [c1, c2] = relay({.idle_timeout = 200ms});
  SpliceRelay::Result r = result();
  EXPECT_EQ(r.ended, "idle");
  EXPECT_EQ(read_to_eof(c1), "");
  EXPECT_EQ(read_to_eof(c2), "");
}

TEST_F(SpliceRelayTest, TrafficKeepsATunnelFromIdling) {
  auto [c1, c2] = relay({.idle_timeout = 300ms});
  char byte;
  for (int i = 0; i < 8; ++i) {  // 8 x 100 ms: longer than the idle timeout, never idle that long
    std::this_thread::sleep_for(100ms);
    boost::asio::write(c1, boost::asio::buffer("x", 1));
    boost::asio::read(c2, boost::asio::buffer(&byte, 1));
  }
  relay_->stop();
  EXPECT_EQ(result().ended, "stopped");
}

TEST_F(SpliceRelayTest, AResetEndsBoth) {
  auto [c1, c2] = relay({});
  c2.set_option(boost::asio::socket_base::linger(true, 0));  // close sends RST
  c2.close();
  SpliceRelay::Result r = result();
  EXPECT_NE(r.ended, "idle");
  EXPECT_EQ(read_to_eof(c1), "");
}

}  // namespace
}  // namespace agentbox::net
