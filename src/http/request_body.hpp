#pragma once
// Beast Body type for requests: the body lands in memory, or — for routes that take large
// uploads — in an unlinked temp file, so a 10 GiB upload costs no memory. The session picks
// the destination after reading the header and before the first body byte.
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

#include <unistd.h>

#include "util/unique_fd.hpp"

namespace agentbox::http {

struct RequestBody {
  struct value_type {
    std::string memory;      // when file is not set
    UniqueFd file;           // set before reading: the body is appended here instead
    std::uint64_t size = 0;  // bytes received
    int write_errno = 0;     // set when writing to file failed (a server fault, not the client's)
  };

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      // The session has checked the length against the route's limit already.
      if (length && !body_.file) body_.memory.reserve(static_cast<size_t>(*length));
      ec = {};
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      std::size_t total = 0;
      for (auto b : boost::beast::buffers_range_ref(buffers)) {
        const char* data = static_cast<const char*>(b.data());
        if (body_.file) {
          if (!write_fully(data, b.size(), ec)) return total;
        } else {
          body_.memory.append(data, b.size());
        }
        total += b.size();
        body_.size += b.size();
      }
      ec = {};
      return total;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    bool write_fully(const char* data, std::size_t n, boost::beast::error_code& ec) {
      while (n > 0) {
        ssize_t w = ::write(body_.file.get(), data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          body_.write_errno = errno;
          ec.assign(errno, boost::system::system_category());
          return false;
        }
        data += w;
        n -= static_cast<std::size_t>(w);
      }
      return true;
    }

    value_type& body_;
  };
};

}  // namespace agentbox::http
