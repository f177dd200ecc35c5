#pragma once
// An ordinary HTTP answer on a connection a takeover route owns (router.hpp): a request the
// route turns down before upgrading it, or one that is not an upgrade at all. The connection
// closes after the answer, since its session no longer reads it.
#include "http/response.hpp"
#include "http/router.hpp"

namespace agentbox::http {

// Writes response (Content-Length and Connection: close added), then closes; bounded by a
// write deadline. Returns at once.
void respond_and_close(Takeover takeover, Response response);

}  // namespace agentbox::http
