#include "net/egress_proxy.hpp"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "util/error.hpp"

namespace agentbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

EgressProxy::EgressProxy(asio::io_context& io, std::shared_ptr<EgressContext> context)
    : io_(io), context_(std::move(context)) {}

EgressProxy::~EgressProxy() { stop_all(); }

void EgressProxy::serve(UniqueFd listener_fd, const std::string& account, const std::string& user) {
  auto who = std::make_shared<EgressAccount>();
  who->account = account;
  who->user = user;
  auto listener = std::make_shared<Listener>(io_, std::move(who), context_);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  check(::getsockname(listener_fd.get(), reinterpret_cast<sockaddr*>(&local), &len), "getsockname(egress listener)");
  listener->acceptor.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listener_fd.release());
  std::shared_ptr<Listener> previous;
  {
    std::lock_guard lock(mu_);
    previous = std::exchange(listeners_[account], listener);
  }
  if (previous) asio::post(previous->acceptor.get_executor(), [previous] { previous->acceptor.close(); });
  asio::post(listener->acceptor.get_executor(), [listener] { do_accept(listener); });
}

void EgressProxy::do_accept(std::shared_ptr<Listener> listener) {
  // Each connection gets a strand of its own: its session's handlers never run concurrently.
  listener->acceptor.async_accept(asio::make_strand(listener->io), [listener](boost::system::error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) return;
    if (!ec) {
      std::make_shared<EgressSession>(std::move(s), listener->who, listener->context)->start();
      return do_accept(listener);
    }
    // Other errors (EMFILE, a reset before accept) end one connection, never the listener; a
    // short pause keeps a lack of descriptors from spinning the thread.
    listener->backoff.expires_after(std::chrono::milliseconds(50));
    listener->backoff.async_wait([listener](boost::system::error_code) { do_accept(listener); });
  });
}

void EgressProxy::stop(const std::string& account) {
  std::shared_ptr<Listener> listener;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(account);
    if (it == listeners_.end()) return;
    listener = std::move(it->second);
    listeners_.erase(it);
  }
  asio::post(listener->acceptor.get_executor(), [listener] {
      listener->acceptor.close();
      listener->backoff.cancel();
    });
}

void EgressProxy::stop_all() {
  std::map<std::string, std::shared_ptr<Listener>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(listeners_);
  }
  for (auto& [account, listener] : all)
    asio::post(listener->acceptor.get_executor(), [listener] {
      listener->acceptor.close();
      listener->backoff.cancel();
    });
}

size_t EgressProxy::listeners() const {
  std::lock_guard lock(mu_);
  return listeners_.size();
}

}  // namespace agentbox::net
