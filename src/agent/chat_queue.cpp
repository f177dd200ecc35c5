#include "agent/chat_queue.hpp"

#include <algorithm>

namespace agentbox::agent {

ChatQueue::Hold::Hold(std::shared_ptr<ChatQueue> queue, std::string chat)
    : queue_(std::move(queue)), chat_(std::move(chat)) {}

ChatQueue::Hold::~Hold() { queue_->release(chat_); }

std::shared_ptr<ChatQueue::Ticket> ChatQueue::ticket(std::string chat, Start start) {
  auto t = std::make_shared<Ticket>();
  t->chat_ = std::move(chat);
  t->start_ = std::move(start);
  return t;
}

ChatQueue::Entry ChatQueue::enter(const std::shared_ptr<Ticket>& ticket) {
  {
    std::lock_guard lock(mu_);
    if (ticket->state_ == Ticket::State::left) return {Entered::left, 0};
    auto [it, free] = chats_.try_emplace(ticket->chat_);
    auto& waiting = it->second;
    if (!free) {
      if (waiting.size() >= max_waiting_) return {Entered::full, waiting.size()};
      ticket->state_ = Ticket::State::waiting;
      waiting.push_back(ticket);
      return {Entered::waiting, waiting.size()};
    }
    ticket->state_ = Ticket::State::started;
  }
  start(ticket);
  return {Entered::started, 0};
}

bool ChatQueue::leave(const std::shared_ptr<Ticket>& ticket) {
  std::shared_ptr<Ticket> gone;  // its start (and what it holds) ends outside the lock
  {
    std::lock_guard lock(mu_);
    if (ticket->state_ == Ticket::State::fresh) ticket->state_ = Ticket::State::left;
    if (ticket->state_ != Ticket::State::waiting) return false;
    ticket->state_ = Ticket::State::left;
    auto& waiting = chats_.at(ticket->chat_);
    waiting.erase(std::find(waiting.begin(), waiting.end(), ticket));
    gone = ticket;
  }
  Start dropped = std::move(gone->start_);
  return true;
}

std::size_t ChatQueue::waiting(const std::string& chat) const {
  std::lock_guard lock(mu_);
  auto it = chats_.find(chat);
  return it == chats_.end() ? 0 : it->second.size();
}

void ChatQueue::release(const std::string& chat) {
  std::shared_ptr<Ticket> next;
  {
    std::lock_guard lock(mu_);
    auto it = chats_.find(chat);
    if (it == chats_.end()) return;  // cannot happen: a Hold's chat is here until it ends
    if (it->second.empty()) {
      chats_.erase(it);
      return;
    }
    next = std::move(it->second.front());
    it->second.pop_front();
    next->state_ = Ticket::State::started;
  }
  start(next);
}

void ChatQueue::start(const std::shared_ptr<Ticket>& ticket) {
  Start start = std::move(ticket->start_);
  auto hold = std::make_shared<Hold>(shared_from_this(), ticket->chat_);
  // A start that throws (it must not) loses its turn, never the chat: the hold still ends.
  try {
    start(std::move(hold));
  } catch (...) {
  }
}

}  // namespace agentbox::agent
