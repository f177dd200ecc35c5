#pragma once
// Listening sockets the daemon made inside accounts' network namespaces (DESIGN §4), one per
// account and service, served on the daemon's loop. The listener a connection arrives on is
// the account it speaks for: no credential is asked, none can be forged from inside a box.
// The egress proxy and the inference gateway each keep one set.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "util/unique_fd.hpp"

namespace agentbox::net {

// The box a listener serves.
struct BoxAccount {
  std::string account;          // Account::name: the log's and the ledger's key
  std::string user;             // the external user id: the policy's key
  std::atomic<size_t> open{0};  // connections open now (the service counts them)
};

class AccountListeners {
 public:
  // Runs for each accepted connection, on a strand of its own.
  using OnConnection = std::function<void(boost::asio::ip::tcp::socket, const std::shared_ptr<BoxAccount>&)>;

  AccountListeners(boost::asio::io_context& io, OnConnection on_connection);
  ~AccountListeners();  // stop_all()
  AccountListeners(const AccountListeners&) = delete;
  AccountListeners& operator=(const AccountListeners&) = delete;

  // Serves listener (listening already) for the account until stop(account); replaces a
  // listener the account had.
  void serve(UniqueFd listener, const std::string& account, const std::string& user);
  // Stops accepting for the account; connections already open run to their end.
  void stop(const std::string& account);
  void stop_all();
  size_t size() const;

 private:
  struct Listener;  // what an accept loop needs, held by the loop: it may outlive this by a handler
  static void do_accept(std::shared_ptr<Listener> listener);
  static void close(const std::shared_ptr<Listener>& listener);

  boost::asio::io_context& io_;
  const std::shared_ptr<const OnConnection> on_connection_;
  mutable std::mutex mu_;  // guards listeners_
  std::map<std::string, std::shared_ptr<Listener>> listeners_;
};

}  // namespace agentbox::net
