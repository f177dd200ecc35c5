// X-Terminal-Context-Id as Open WebUI sends it: default, chat:<id>, automation:<id>; anything
// else is a 400 that names the header.
#include "accounts/context_id.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "http/error.hpp"

namespace agentbox::accounts {
namespace {

http::Request with_context(std::optional<std::string> value) {
  http::Request req;
  if (value) req.headers.insert("X-Terminal-Context-Id", *value);
  return req;
}

TEST(ContextId, AbsentOrEmptyIsTheDefault) {
  EXPECT_EQ(context_id_of(with_context(std::nullopt)), "default");
  EXPECT_EQ(context_id_of(with_context("")), "default");
  EXPECT_EQ(context_id_of(with_context("default")), "default");
}

TEST(ContextId, ChatsAndAutomationsAreTheirOwn) {
  EXPECT_EQ(context_id_of(with_context("chat:3f2a-9c")), "chat:3f2a-9c");
  EXPECT_EQ(context_id_of(with_context("automation:nightly")), "automation:nightly");
  EXPECT_EQ(context_id_of(with_context("chat:" + std::string(251, 'x'))).size(), 256u);
}

TEST(ContextId, AnythingElseIs400NamingTheHeader) {
  const std::vector<std::string> bad_ids = {
      "chat:", "automation:", "session:1", "Chat:1", "chat:a\tb", "chat:a\x7f", "chat:" + std::string(252, 'x')};
  for (const std::string& bad : bad_ids) {
    try {
      context_id_of(with_context(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const http::HttpError& e) {
      EXPECT_EQ(e.status(), http::status::bad_request) << bad;
      EXPECT_NE(std::string(e.detail()).find("X-Terminal-Context-Id"), std::string::npos) << e.detail();
    }
  }
  http::Request twice;
  twice.headers.insert("X-Terminal-Context-Id", "chat:a");
  twice.headers.insert("X-Terminal-Context-Id", "chat:b");
  EXPECT_THROW(context_id_of(twice), http::HttpError);
}

}  // namespace
}  // namespace agentbox::accounts
