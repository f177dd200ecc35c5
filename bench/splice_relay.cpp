// The ceiling of any CONNECT relay on this machine, for bench/egress_bench.sh: it reads one
// `CONNECT HOST:PORT` head per connection (numeric IPv4 only, no policy, no limits), connects,
// answers 200 and moves the bytes with blocking splice(2) through a pipe, one thread per
// direction. Nothing but the unavoidable work.
//
//   splice_relay PORT       (listens on 127.0.0.1:PORT)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

void pump(int from, int to) {
  int p[2];
  if (::pipe(p) != 0) return;
  for (;;) {
    ssize_t n = ::splice(from, nullptr, p[1], nullptr, 1 << 20, SPLICE_F_MOVE);
    if (n <= 0) break;
    while (n > 0) {
      ssize_t m = ::splice(p[0], nullptr, to, nullptr, static_cast<size_t>(n), SPLICE_F_MOVE);
      if (m <= 0) goto done;
      n -= m;
    }
  }
done:
  ::shutdown(to, SHUT_WR);
  ::close(p[0]);
  ::close(p[1]);
}

void serve(int client) {
  std::string head;
  char c;
  while (head.size() < 8192 && head.find("\r\n\r\n") == std::string::npos && ::read(client, &c, 1) == 1) head += c;
  char host[256];
  int port = 0;
  if (std::sscanf(head.c_str(), "CONNECT %255[0-9.]:%d", host, &port) != 2) return (void)::close(client);
  int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host, &addr.sin_addr);
  if (::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(upstream);
    return (void)::close(client);
  }
  const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  if (::write(client, ok, sizeof ok - 1) < 0) return;
  std::thread up(pump, client, upstream);
  pump(upstream, client);
  up.join();
  ::close(upstream);
  ::close(client);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: splice_relay PORT\n");
    return 2;
  }
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[1])));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 64) != 0) {
    std::perror("splice_relay: bind/listen");
    return 1;
  }
  for (;;) {
    int c = ::accept(s, nullptr, nullptr);
    if (c >= 0) std::thread(serve, c).detach();
  }
}
