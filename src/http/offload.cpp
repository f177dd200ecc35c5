#include "http/offload.hpp"

#include <fcntl.h>

#include <exception>

#include "http/response_writer.hpp"
#include "util/error.hpp"

namespace agentbox::http {

AsyncHandler offload(std::shared_ptr<FairPool> pool, Handler handler) {
  return offload(std::move(pool), BlockingWork([handler = std::move(handler)](
                                                   const Request& req, const std::shared_ptr<ResponseWriter>& w) {
                   w->send(handler(req));
                 }));
}

AsyncHandler offload(std::shared_ptr<FairPool> pool, BlockingWork work) {
  auto shared = std::make_shared<const BlockingWork>(std::move(work));
  return [pool = std::move(pool), shared](const Request& req, std::shared_ptr<ResponseWriter> writer) {
    // The copy travels with the job: req is only valid during this call.
    auto owned = std::make_shared<Request>(copy_request(req));
    // The account is the header as sent: resolving the caller is the job's work, not the io
    // thread's.
    std::string account(req.header("X-User-Id").value_or(""));
    pool->post(account, [shared, owned, writer = std::move(writer)] {
      if (!writer->is_open()) return;  // the client left while the job waited
      try {
        (*shared)(*owned, writer);
      } catch (...) {
        writer->fail(std::current_exception());
      }
    });
  };
}

Request copy_request(const Request& req) {
  Request out;
  out.method = req.method;
  out.target = req.target;
  out.path = req.path;
  out.path_params = req.path_params;
  out.query = req.query;
  out.headers = req.headers;
  out.body = req.body;
  out.body_size = req.body_size;
  out.listener_tag = req.listener_tag;
  out.remote_address = req.remote_address;
  out.local_address = req.local_address;
  out.scope = req.scope;
  if (req.body_file) {
    out.body_file = UniqueFd(::fcntl(req.body_file.get(), F_DUPFD_CLOEXEC, 0));
    check(out.body_file.get(), "fcntl(F_DUPFD_CLOEXEC) of the request body file");
  }
  return out;
}

}  // namespace agentbox::http
