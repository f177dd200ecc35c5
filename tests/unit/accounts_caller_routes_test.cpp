// Routes given their caller (accounts/caller_routes.hpp), through a real HttpServer with one io
// thread, as the daemon runs it. A caller the directory has ready is resolved on the io thread
// and its handler runs there; one that is not (a new user: an account and a volume to make)
// waits in the pool, so a new user whose volume is slow to make (held by the volumes' test
// hook) delays nobody else: not a known user, not another new user, not the io thread.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "accounts/caller_routes.hpp"
#include "accounts/directory.hpp"
#include "http/offload.hpp"
#include "http/response_writer.hpp"
#include "http/server.hpp"
#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox::accounts {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kKey[] = "caller-routes-test-key";

struct Reply {
  unsigned status = 0;
  std::string body;
};

// One GET on a fresh connection; status 0 when no answer came within the deadline.
Reply get(uint16_t port, const std::string& target, const std::string& user, std::chrono::seconds deadline = 30s) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  req.set(bhttp::field::authorization, std::string("Bearer ") + kKey);
  if (!user.empty()) req.set("X-User-Id", user);
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  Reply reply;
  stream.expires_after(deadline);
  bhttp::async_write(stream, req, [&](beast::error_code ec, std::size_t) {
    if (ec) return;
    bhttp::async_read(stream, buffer, res, [&](beast::error_code e, std::size_t) {
      if (!e) reply = {res.result_int(), res.body()};
    });
  });
  ioc.run();
  return reply;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

class CallerRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto volumes = std::make_shared<AccountVolumes>(scratch_.path(), make_volume_backend(false),
                                                    [](const std::string&) { return DiskQuota{}; });
    // Accounts named slow-*: their volume is not made until the test lets it.
    volumes->set_hold([this](const std::string& name) {
      if (!name.starts_with("slow")) return;
      std::unique_lock lock(mu_);
      ++held_;
      held_cv_.notify_all();
      held_cv_.wait(lock, [this] { return released_; });
    });
    callers_ = std::make_unique<AccountDirectory>(accounts_, scratch_.path(), CallerCacheLimits{}, volumes);
    pool_ = std::make_shared<FairPool>(4, 2);
    callers_->set_pool(pool_);

    http::Router router;
    router.add_async(http::verb::get, "/whoami",
                     with_caller(*callers_, [this](const http::Request&, const Caller& caller) {
                       std::lock_guard lock(mu_);
                       threads_[caller.account.external_id].insert(std::this_thread::get_id());
                       return http::Response::json({{"name", caller.account.name}});
                     }));
    router.add(http::verb::get, "/io-thread", [this](const http::Request&) {
      std::lock_guard lock(mu_);
      io_thread_ = std::this_thread::get_id();
      return http::Response::json({{"ok", true}});
    });
    http::HttpServerOptions options;
    options.threads = 1;
    options.api_key = kKey;
    server_ = std::make_unique<http::HttpServer>(std::move(router), options);
    port_ = server_->listen("127.0.0.1", 0).port;
    server_->start();
    ASSERT_EQ(get(port_, "/io-thread", "").status, 200u);
  }

  void TearDown() override {
    release();
    server_->stop();
    server_.reset();
    pool_.reset();
    callers_.reset();
  }

  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    held_cv_.notify_all();
  }
  void wait_until_held() {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(held_cv_.wait_for(lock, 10s, [this] { return held_ > 0; })) << "the slow volume was never asked for";
  }
  std::set<std::thread::id> threads_of(const std::string& user) {
    std::lock_guard lock(mu_);
    return threads_[user];
  }

  static http::Request request(const std::string& user) {
    http::Request req;
    req.headers.set("X-User-Id", user);
    return req;
  }

  testing::ScratchDir scratch_{"agentbox-caller-routes"};
  AccountStore accounts_{open_state_db(scratch_.path()), UidRange{4300000, 1000}};
  std::unique_ptr<AccountDirectory> callers_;
  std::shared_ptr<FairPool> pool_;
  std::unique_ptr<http::HttpServer> server_;
  uint16_t port_ = 0;

  std::mutex mu_;
  std::condition_variable held_cv_;
  int held_ = 0;
  bool released_ = false;
  std::thread::id io_thread_;
  std::map<std::string, std::set<std::thread::id>> threads_;  // user → threads their handler ran on
};

TEST_F(CallerRoutesTest, AReadyCallerIsResolvedOnTheIoThreadAnUnknownOneInThePool) {
  EXPECT_FALSE(callers_->ready(request("alice"))) << "never seen: an account to make";
  EXPECT_TRUE(callers_->ready(http::Request{})) << "no user: its 400 costs nothing";
  ASSERT_EQ(get(port_, "/whoami", "alice").status, 200u);
  EXPECT_TRUE(callers_->ready(request("alice")));
  ASSERT_EQ(get(port_, "/whoami", "alice").status, 200u);

  const auto alice = threads_of("alice");
  ASSERT_EQ(alice.size(), 2u) << "the first request on a pool thread, the second on the io thread";
  EXPECT_TRUE(alice.contains(io_thread_));

  // Answers are those of resolving in the handler: no user is a 400, whichever thread.
  EXPECT_EQ(get(port_, "/whoami", "").status, 400u);
}

TEST_F(CallerRoutesTest, ASlowNewVolumeDelaysOnlyItsOwnUser) {
  ASSERT_EQ(get(port_, "/whoami", "known").status, 200u);  // an account and volume made before

  auto slow = std::async(std::launch::async, [&] { return get(port_, "/whoami", "slow-newcomer"); });
  wait_until_held();

  // Meanwhile: a known user, another new user, and the io thread's own routes answer at once.
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) ASSERT_EQ(get(port_, "/whoami", "known", 5s).status, 200u);
  EXPECT_EQ(get(port_, "/whoami", "another-newcomer", 5s).status, 200u);
  EXPECT_EQ(get(port_, "/io-thread", "", 5s).status, 200u);
  EXPECT_LT(ms_since(t0), 2000) << "others waited for the slow volume";
  EXPECT_EQ(slow.wait_for(0s), std::future_status::timeout) << "the slow user was answered before its volume";

  // The slow user's own second request waits for the same volume.
  auto again = std::async(std::launch::async, [&] { return get(port_, "/whoami", "slow-newcomer"); });
  EXPECT_EQ(again.wait_for(300ms), std::future_status::timeout);

  release();
  EXPECT_EQ(slow.get().status, 200u);
  EXPECT_EQ(again.get().status, 200u);
  EXPECT_EQ(accounts_.list().size(), 3u);
}

TEST_F(CallerRoutesTest, ResolveCallerAnswersAtOnceWhenReadyElseFromThePool) {
  const auto resolved_on = [&](const std::string& user) {
    std::promise<std::pair<std::thread::id, std::string>> got;
    resolve_caller(*callers_, request(user), false, HomeUse::write, [&](Resolved r) {
      std::string name;
      try {
        name = r.get().account.name;
      } catch (const std::exception& e) {
        name = std::string("error: ") + e.what();
      }
      got.set_value({std::this_thread::get_id(), name});
    });
    return got.get_future().get();
  };
  const auto [first_thread, first_name] = resolved_on("carol");
  EXPECT_NE(first_thread, std::this_thread::get_id()) << "not ready: on the pool";
  const auto [second_thread, second_name] = resolved_on("carol");
  EXPECT_EQ(second_thread, std::this_thread::get_id()) << "ready: at once, here";
  EXPECT_EQ(first_name, second_name);

  // A refusal travels as the error (here: the account being deleted).
  callers_->begin_delete(callers_->resolve(request("carol")).account);
  EXPECT_NE(resolved_on("carol").second.find("being deleted"), std::string::npos);
}

}  // namespace
}  // namespace agentbox::accounts
