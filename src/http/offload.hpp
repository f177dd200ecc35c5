#pragma once
// offload(): the HTTP library's way to run blocking work (file I/O, SQLite, zipping) off the io
// thread, on a FairPool (util/fair_pool.hpp), so the io thread never waits on a disk. A route
// hands its work to the pool through offload(), which returns an AsyncHandler: the io thread
// copies the request, queues the work and is free again; a pool thread runs it and answers
// through the ResponseWriter.
//
// The pool is shared fairly between accounts, keyed by the request's X-User-Id: each account's
// work waits in its own queue, at most the pool's per-key limit of its jobs run at once, and
// idle threads take the accounts in turn. One account's slow greps delay its own next request,
// not everyone's.
//
// Work that switches the thread's filesystem identity (FsIdentity) does so inside one call and
// gives it back before returning: pool threads serve every account in turn.
//
// Ownership: the handlers offload() returns hold the pool (shared_ptr), so it lives as long as
// the route table; the jobs they queue hold only the request, the writer and the work, never
// the pool (a pool thread cannot join itself). The pool's destructor waits for queued work.
#include <functional>
#include <memory>
#include <string>

#include "http/request.hpp"
#include "http/response.hpp"
#include "http/router.hpp"
#include "util/fair_pool.hpp"

namespace agentbox::http {

class ResponseWriter;

// Work that answers through the writer itself (send_file, streams); an exception it lets escape
// is answered as a synchronous handler's would be (writer.fail).
using BlockingWork = std::function<void(const Request&, const std::shared_ptr<ResponseWriter>&)>;

// An AsyncHandler that runs `handler` on `pool` and sends its Response (or the response for its
// exception), queued for the request's X-User-Id (without one: the account ""). Work whose
// client left while it was queued is dropped unrun.
AsyncHandler offload(std::shared_ptr<FairPool> pool, Handler handler);
// The same for work that answers through the writer itself.
AsyncHandler offload(std::shared_ptr<FairPool> pool, BlockingWork work);

// An owned copy of `req` for work that outlives the handler call (whose Request reference does
// not): every field copied, the spooled body file duplicated (same open file, offset 0).
Request copy_request(const Request& req);

}  // namespace agentbox::http
