#pragma once
// ChatQueue: one run per chat (issue 32). A turn of a chat whose previous turn still runs waits,
// in the order it came, until that turn is over, so two Claude Code CLIs never share a session
// and each turn resumes the session the one before it left (it reads the chat's session when it
// starts, not when it arrives). Nothing waits on a thread: a waiting turn is a callback in its
// chat's queue, run by whoever lets go of the chat.
//
// A started turn holds its chat through a Hold until its answer is over; the Hold's end starts
// the next waiting turn. A turn whose client left while it waited leaves the queue and never
// starts. At most max_waiting turns wait per chat: enter() refuses one more (the route's 429).
// Background tasks and one-shot turns (no chat) never enter it.
//
// Runs on: any thread. One mutex guards the chats; start callbacks run outside it, on the thread
// of enter() (a free chat) or of the Hold's end (the turn before).
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace agentbox::agent {

class ChatQueue : public std::enable_shared_from_this<ChatQueue> {
 public:
  // A chat held by its running turn; destroying it starts the chat's next waiting turn.
  class Hold {
   public:
    Hold(std::shared_ptr<ChatQueue> queue, std::string chat);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    std::shared_ptr<ChatQueue> queue_;
    std::string chat_;
  };

  // Runs when the turn's time comes; must not throw and should only hand the work on (post it):
  // it may run on the thread that ended the turn before.
  using Start = std::function<void(std::shared_ptr<Hold>)>;

  // A turn's place in its chat's queue (ticket()), entered by enter().
  class Ticket {
    friend class ChatQueue;
    enum class State { fresh, waiting, started, left };
    std::string chat_;
    Start start_;
    State state_ = State::fresh;  // guarded by the queue's mutex
  };

  enum class Entered {
    started,  // the chat was free: start ran
    waiting,  // queued behind the running turn (and any that came before it)
    full,     // max_waiting turns wait already: refused, start never runs
    left,     // its client left before: start never runs
  };
  struct Entry {
    Entered how = Entered::started;
    std::size_t waiting = 0;  // turns waiting for the chat now, this one included when it waits
  };

  explicit ChatQueue(std::size_t max_waiting) : max_waiting_(max_waiting) {}

  // A turn of `chat` (a key unique per account and chat) that start()s when its time comes; not
  // in the queue yet, so that its client's leaving can be wired to leave() before it can start.
  std::shared_ptr<Ticket> ticket(std::string chat, Start start);
  Entry enter(const std::shared_ptr<Ticket>& ticket);
  // Its client left: a waiting turn leaves the queue (a fresh one never enters); a started one
  // is not touched (it stops its own run). True when it was waiting.
  bool leave(const std::shared_ptr<Ticket>& ticket);

  std::size_t waiting(const std::string& chat) const;  // turns waiting for chat (not the running one)
  std::size_t max_waiting() const { return max_waiting_; }

 private:
  void release(const std::string& chat);
  void start(const std::shared_ptr<Ticket>& ticket);

  const std::size_t max_waiting_;
  mutable std::mutex mu_;
  // A chat is here while a turn holds it, with the turns waiting for it in order.
  std::unordered_map<std::string, std::deque<std::shared_ptr<Ticket>>> chats_;
};

}  // namespace agentbox::agent
