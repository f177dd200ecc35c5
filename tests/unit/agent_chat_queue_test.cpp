// ChatQueue: a chat's turns start one at a time, in the order they came; a turn whose client
// left while it waited never starts; past the bound a turn is refused; chats do not wait for
// each other.
#include "agent/chat_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace agentbox::agent {
namespace {

using Hold = std::shared_ptr<ChatQueue::Hold>;

// Turns that record their start and keep their hold until the test ends them by name.
struct Turns {
  std::shared_ptr<ChatQueue> queue;
  std::vector<std::string> started;
  std::vector<std::pair<std::string, Hold>> holding;

  explicit Turns(size_t max_waiting) : queue(std::make_shared<ChatQueue>(max_waiting)) {}

  std::shared_ptr<ChatQueue::Ticket> ticket(const std::string& chat, const std::string& name) {
    return queue->ticket(chat, [this, name](Hold h) {
      started.push_back(name);
      holding.emplace_back(name, std::move(h));
    });
  }
  ChatQueue::Entry send(const std::string& chat, const std::string& name) { return queue->enter(ticket(chat, name)); }
  void end(const std::string& name) {
    for (auto it = holding.begin(); it != holding.end(); ++it)
      if (it->first == name) {
        Hold h = std::move(it->second);
        holding.erase(it);
        return;  // h ends here: the chat's next turn starts
      }
    FAIL() << name << " holds nothing";
  }
};

TEST(ChatQueue, AChatsTurnsRunOneAfterTheOtherInOrder) {
  Turns t(4);
  EXPECT_EQ(t.send("alice\nc1", "first").how, ChatQueue::Entered::started);
  auto second = t.send("alice\nc1", "second");
  EXPECT_EQ(second.how, ChatQueue::Entered::waiting);
  EXPECT_EQ(second.waiting, 1u);
  EXPECT_EQ(t.send("alice\nc1", "third").waiting, 2u);
  EXPECT_EQ(t.started, (std::vector<std::string>{"first"}));
  t.end("first");
  EXPECT_EQ(t.started, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(t.queue->waiting("alice\nc1"), 1u);
  t.end("second");
  t.end("third");
  EXPECT_EQ(t.started, (std::vector<std::string>{"first", "second", "third"}));
  // Free again: the next turn starts at once.
  EXPECT_EQ(t.send("alice\nc1", "fourth").how, ChatQueue::Entered::started);
}

TEST(ChatQueue, OtherChatsAndOtherUsersDoNotWait) {
  Turns t(4);
  EXPECT_EQ(t.send("alice\nc1", "a1").how, ChatQueue::Entered::started);
  EXPECT_EQ(t.send("alice\nc2", "a2").how, ChatQueue::Entered::started);
  EXPECT_EQ(t.send("bob\nc1", "b1").how, ChatQueue::Entered::started);
  EXPECT_EQ(t.started.size(), 3u);
}

TEST(ChatQueue, ATurnWhoseClientLeftWhileWaitingNeverStarts) {
  Turns t(4);
  t.send("c", "first");
  auto gone = t.ticket("c", "gone");
  EXPECT_EQ(t.queue->enter(gone).how, ChatQueue::Entered::waiting);
  t.send("c", "next");
  EXPECT_TRUE(t.queue->leave(gone));
  EXPECT_FALSE(t.queue->leave(gone));  // once
  EXPECT_EQ(t.queue->waiting("c"), 1u);
  t.end("first");
  EXPECT_EQ(t.started, (std::vector<std::string>{"first", "next"}));
}

TEST(ChatQueue, ATurnWhoseClientLeftBeforeItEnteredNeverEnters) {
  Turns t(4);
  auto gone = t.ticket("c", "gone");
  EXPECT_FALSE(t.queue->leave(gone));
  EXPECT_EQ(t.queue->enter(gone).how, ChatQueue::Entered::left);
  EXPECT_TRUE(t.started.empty());
  EXPECT_EQ(t.send("c", "next").how, ChatQueue::Entered::started);  // the chat was not taken
}

TEST(ChatQueue, LeavingAStartedTurnChangesNothing) {
  Turns t(4);
  auto first = t.ticket("c", "first");
  t.queue->enter(first);
  t.send("c", "second");
  EXPECT_FALSE(t.queue->leave(first));  // it stops its own run; its hold still ends the turn
  EXPECT_EQ(t.queue->waiting("c"), 1u);
  t.end("first");
  EXPECT_EQ(t.started, (std::vector<std::string>{"first", "second"}));
}

TEST(ChatQueue, PastTheBoundATurnIsRefusedAndNeverStarts) {
  Turns t(2);
  t.send("c", "running");
  t.send("c", "w1");
  t.send("c", "w2");
  auto refused = t.send("c", "w3");
  EXPECT_EQ(refused.how, ChatQueue::Entered::full);
  EXPECT_EQ(refused.waiting, 2u);
  t.end("running");
  t.end("w1");
  t.end("w2");
  EXPECT_EQ(t.started, (std::vector<std::string>{"running", "w1", "w2"}));
}

TEST(ChatQueue, WithNoWaitingAllowedABusyChatRefusesAtOnce) {
  Turns t(0);
  t.send("c", "running");
  EXPECT_EQ(t.send("c", "next").how, ChatQueue::Entered::full);
}

TEST(ChatQueue, AStartThatDropsItsHoldPassesTheChatOn) {
  auto queue = std::make_shared<ChatQueue>(4);
  std::vector<std::string> started;
  Hold first;
  queue->enter(queue->ticket("c", [&](Hold h) { first = std::move(h); }));
  // A turn that finds its client gone when its time comes lets go at once.
  queue->enter(queue->ticket("c", [&](Hold) { started.push_back("dropped"); }));
  queue->enter(queue->ticket("c", [&](Hold) { started.push_back("after"); }));
  first.reset();
  EXPECT_EQ(started, (std::vector<std::string>{"dropped", "after"}));
  EXPECT_EQ(queue->waiting("c"), 0u);
  queue->enter(queue->ticket("c", [&](Hold) { started.push_back("free"); }));
  EXPECT_EQ(started.back(), "free");
}

TEST(ChatQueue, ManyThreadsOneChatNeverTwoAtOnce) {
  auto queue = std::make_shared<ChatQueue>(1000);
  std::atomic<int> running{0}, most{0}, done{0};
  std::mutex mu;
  std::vector<Hold> holds;  // started turns, ended by the main thread in order
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 50; ++j)
        queue->enter(queue->ticket("c", [&](Hold h) {
          most = std::max(most.load(), ++running);
          std::lock_guard lock(mu);
          holds.push_back(std::move(h));
        }));
    });
  while (done < 400) {
    Hold h;
    {
      std::lock_guard lock(mu);
      if (!holds.empty()) {
        h = std::move(holds.back());
        holds.pop_back();
      }
    }
    if (!h) {
      std::this_thread::yield();
      continue;
    }
    --running;
    ++done;
    h.reset();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(queue->waiting("c"), 0u);
}

}  // namespace
}  // namespace agentbox::agent
