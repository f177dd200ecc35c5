#pragma once
// The egress proxy's listeners: one per box, a TCP socket the daemon made, bound and put to
// listen inside the account's network namespace (DESIGN §4), served here on the daemon's loop.
// The listener a connection arrives on is the account it speaks for: no credential is asked,
// none can be forged from inside a box.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "net/egress_session.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::net {

class EgressProxy {
 public:
  EgressProxy(boost::asio::io_context& io, std::shared_ptr<EgressContext> context);
  ~EgressProxy();  // stop_all()
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Serves listener (listening already) for the account's box until stop(account); replaces
  // a listener the account had.
  void serve(UniqueFd listener, const std::string& account, const std::string& user);
  // Stops accepting for the account; connections already open run to their end.
  void stop(const std::string& account);
  void stop_all();

  // A new policy for every request judged from now on (SIGHUP).
  void set_config(std::shared_ptr<const EgressConfig> config) { context_->set_config(std::move(config)); }
  size_t listeners() const;

 private:
  // What an accept loop needs, held by the loop itself: it may outlive the EgressProxy by a
  // handler or two after stop.
  struct Listener {
    Listener(boost::asio::io_context& io, std::shared_ptr<EgressAccount> who, std::shared_ptr<EgressContext> context)
        : io(io), acceptor(boost::asio::make_strand(io)), backoff(acceptor.get_executor()), who(std::move(who)),
          context(std::move(context)) {}
    boost::asio::io_context& io;
    boost::asio::ip::tcp::acceptor acceptor;  // on a strand: stop() never races the loop
    boost::asio::steady_timer backoff;        // after a failed accept (EMFILE): no busy loop
    std::shared_ptr<EgressAccount> who;
    std::shared_ptr<EgressContext> context;
  };
  static void do_accept(std::shared_ptr<Listener> listener);

  boost::asio::io_context& io_;
  std::shared_ptr<EgressContext> context_;
  mutable std::mutex mu_;  // guards listeners_
  std::map<std::string, std::shared_ptr<Listener>> listeners_;
};

}  // namespace agentbox::net
