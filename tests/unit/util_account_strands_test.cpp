// AccountStrands: one strand per account on the box loop, shared by whoever works for the
// account there while anyone holds it, and forgotten once nobody does.
#include "util/account_strands.hpp"

#include <gtest/gtest.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <string>
#include <vector>

namespace agentbox {
namespace {

TEST(AccountStrands, OneAccountGetsOneStrandWhileItIsHeld) {
  boost::asio::io_context io;
  AccountStrands strands(io);
  auto a = strands.of("alice");
  auto again = strands.of("alice");
  auto b = strands.of("bob");
  EXPECT_EQ(*a, *again);  // the same strand: equal executors share one implementation
  EXPECT_NE(*a, *b);
  EXPECT_EQ(strands.held(), 2u);
}

TEST(AccountStrands, WorkOfTwoHoldersOfOneAccountRunsInOneTurnWithoutASecondPost) {
  boost::asio::io_context io;
  AccountStrands strands(io);
  auto box = strands.of("alice");    // as BoxManager holds it
  auto table = strands.of("alice");  // as ProcessTable holds it
  std::vector<std::string> order;
  boost::asio::post(*box, [&] {
    order.push_back("box event");
    // What the table does with the event runs here and now: dispatch onto the strand that is
    // running finds it already running in this thread.
    boost::asio::dispatch(*table, [&] { order.push_back("table handles it"); });
    order.push_back("box event done");
  });
  io.run();
  EXPECT_EQ(order, (std::vector<std::string>{"box event", "table handles it", "box event done"}));
}

TEST(AccountStrands, AStrandNobodyHoldsIsForgottenAndTheNextOneIsNew) {
  boost::asio::io_context io;
  AccountStrands strands(io);
  auto first = std::make_unique<LoopStrand>(*strands.of("alice"));  // a copy, not a hold
  EXPECT_EQ(strands.held(), 0u);
  auto second = strands.of("alice");
  EXPECT_NE(*first, *second);
  EXPECT_EQ(strands.held(), 1u);
}

TEST(AccountStrands, ManyAccountsThatLeftHoldNothing) {
  boost::asio::io_context io;
  AccountStrands strands(io);
  auto kept = strands.of("kept");
  for (int i = 0; i < 10'000; ++i) strands.of("user-" + std::to_string(i));
  EXPECT_EQ(strands.held(), 1u);
  EXPECT_EQ(*strands.of("kept"), *kept);
}

}  // namespace
}  // namespace agentbox
