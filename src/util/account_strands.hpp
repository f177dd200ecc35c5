#pragma once
// AccountStrands: one strand per account on the box loop, shared by everything that works for
// that account there (its box's owner in BoxManager, its processes in ProcessTable). One strand,
// not one per component, so a box's event for a process (started, exited) is handled in the
// same turn that read it, without a second post, and an account's work is one line however many
// components do it. A strand lives as long as someone holds it; the next of() after that makes
// a new one, so an account that left holds nothing here.
//
// Runs on: any thread (a short lock).
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace agentbox {

using LoopStrand = boost::asio::strand<boost::asio::io_context::executor_type>;

class AccountStrands {
 public:
  explicit AccountStrands(boost::asio::io_context& io) : io_(io) {}
  AccountStrands(const AccountStrands&) = delete;
  AccountStrands& operator=(const AccountStrands&) = delete;

  // The account's strand: the one held by others now, else a new one. Holding the pointer keeps
  // it the account's.
  std::shared_ptr<const LoopStrand> of(const std::string& account);
  // Accounts whose strand someone holds (after forgetting the ones nobody does).
  size_t held();

 private:
  void forget_unheld();  // mu_ held

  boost::asio::io_context& io_;
  std::mutex mu_;  // guards what follows
  std::unordered_map<std::string, std::weak_ptr<const LoopStrand>> strands_;
  size_t sweep_at_ = 64;  // forget_unheld() when the map reaches this size, then twice what is left
};

}  // namespace agentbox
