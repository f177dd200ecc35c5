#include "http/takeover_response.hpp"

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <chrono>
#include <memory>

namespace agentbox::http {

namespace {

namespace beast = boost::beast;
constexpr std::chrono::seconds kWriteDeadline{10};

struct Answer {
  beast::tcp_stream stream;
  http::response<http::string_body> message;
  ConnectionSlot slot;  // the connection counts until it closes
};

}  // namespace

void respond_and_close(Takeover takeover, Response response) {
  takeover.report(static_cast<unsigned>(response.status));
  const unsigned version = takeover.parser ? takeover.parser->get().version() : 11;
  auto answer = std::make_shared<Answer>(Answer{beast::tcp_stream(std::move(takeover.socket)),
                                                http::response<http::string_body>(response.status, version),
                                                std::move(takeover.slot)});
  for (const auto& field : response.headers) answer->message.insert(field.name_string(), field.value());
  answer->message.body() = std::move(response.body);
  answer->message.keep_alive(false);
  answer->message.prepare_payload();
  answer->stream.expires_after(kWriteDeadline);
  http::async_write(answer->stream, answer->message, [answer](beast::error_code, std::size_t) {
    beast::error_code ignored;
    answer->stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
    answer->stream.close();
  });
}

}  // namespace agentbox::http
