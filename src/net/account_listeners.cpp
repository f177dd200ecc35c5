#include "net/account_listeners.hpp"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "util/error.hpp"

namespace agentbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct AccountListeners::Listener {
  Listener(asio::io_context& io, std::shared_ptr<BoxAccount> who, std::shared_ptr<const OnConnection> on_connection)
      : io(io),
        acceptor(asio::make_strand(io)),
        backoff(acceptor.get_executor()),
        who(std::move(who)),
        on_connection(std::move(on_connection)) {}
  asio::io_context& io;
  tcp::acceptor acceptor;      // on a strand: stop() never races the loop
  asio::steady_timer backoff;  // after a failed accept (EMFILE): no busy loop
  std::shared_ptr<BoxAccount> who;
  std::shared_ptr<const OnConnection> on_connection;
};

AccountListeners::AccountListeners(asio::io_context& io, OnConnection on_connection)
    : io_(io), on_connection_(std::make_shared<const OnConnection>(std::move(on_connection))) {}

AccountListeners::~AccountListeners() { stop_all(); }

void AccountListeners::serve(UniqueFd listener_fd, const std::string& account, const std::string& user) {
  auto who = std::make_shared<BoxAccount>();
  who->account = account;
  who->user = user;
  auto listener = std::make_shared<Listener>(io_, std::move(who), on_connection_);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  check(::getsockname(listener_fd.get(), reinterpret_cast<sockaddr*>(&local), &len), "getsockname(listener)");
  listener->acceptor.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listener_fd.release());
  std::shared_ptr<Listener> previous;
  {
    std::lock_guard lock(mu_);
    previous = std::exchange(listeners_[account], listener);
  }
  if (previous) close(previous);
  asio::post(listener->acceptor.get_executor(), [listener] { do_accept(listener); });
}

void AccountListeners::do_accept(std::shared_ptr<Listener> listener) {
  // Each connection gets a strand of its own: its session's handlers never run concurrently.
  listener->acceptor.async_accept(
      asio::make_strand(listener->io), [listener](boost::system::error_code ec, tcp::socket s) {
        if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) return;
        if (!ec) {
          (*listener->on_connection)(std::move(s), listener->who);
          return do_accept(listener);
        }
        // Other errors (EMFILE, a reset before accept) end one connection, never the listener; a
        // short pause keeps a lack of descriptors from spinning the thread.
        listener->backoff.expires_after(std::chrono::milliseconds(50));
        listener->backoff.async_wait([listener](boost::system::error_code) { do_accept(listener); });
      });
}

void AccountListeners::close(const std::shared_ptr<Listener>& listener) {
  asio::post(listener->acceptor.get_executor(), [listener] {
    listener->acceptor.close();
    listener->backoff.cancel();
  });
}

void AccountListeners::stop(const std::string& account) {
  std::shared_ptr<Listener> listener;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(account);
    if (it == listeners_.end()) return;
    listener = std::move(it->second);
    listeners_.erase(it);
  }
  close(listener);
}

void AccountListeners::stop_all() {
  std::map<std::string, std::shared_ptr<Listener>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(listeners_);
  }
  for (auto& [account, listener] : all) close(listener);
}

size_t AccountListeners::size() const {
  std::lock_guard lock(mu_);
  return listeners_.size();
}

}  // namespace agentbox::net
