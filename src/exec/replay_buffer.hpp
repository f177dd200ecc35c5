#pragma once
// The newest bytes of a terminal's output, kept so that a client attaching later (a reload, a
// second tab) first sees the recent screen, then the live output. Bounded: a ring of fixed
// capacity that grows to it on demand and never past it.
#include <cstddef>
#include <string>
#include <string_view>

namespace agentbox::exec {

class ReplayBuffer {
 public:
  explicit ReplayBuffer(size_t capacity);  // bytes, at least 1

  void append(std::string_view bytes);
  // What is kept, oldest first. Once older bytes were dropped, it starts at a UTF-8 character
  // boundary (a terminal would show a cut character as U+FFFD).
  std::string contents() const;

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::string ring_;  // grows to capacity_, then wraps
  size_t start_ = 0;  // index of the oldest byte
  size_t size_ = 0;
  bool dropped_ = false;  // older bytes were overwritten
};

}  // namespace agentbox::exec
