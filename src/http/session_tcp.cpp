// The server's sessions: Session over a TCP socket, compiled once here (session.hpp declares
// the instantiation extern, so nothing else compiles it again).
#include "http/session_impl.hpp"

namespace agentbox::http {

template class Session<tcp::socket>;

}  // namespace agentbox::http
