// The audit trail's pure parts and its file: OCSF events carry the base fields and their class's
// numbers; redaction removes secrets by JSON key, by `name: value` text and by header; the file
// keeps whole lines only (a torn tail from a crash is cut off at open), rotates by size, and
// reports a refused write without leaving part of a line behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "audit/audit_file.hpp"
#include "audit/ocsf.hpp"
#include "audit/redact.hpp"
#include "audit/trail.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox::audit {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void expect_base(const json& e, int class_uid, int activity_id) {
  EXPECT_EQ(e["class_uid"], class_uid);
  EXPECT_EQ(e["category_uid"], class_uid / 1000);
  EXPECT_EQ(e["activity_id"], activity_id);
  EXPECT_EQ(e["type_uid"], class_uid * 100 + activity_id);
  EXPECT_TRUE(e["severity_id"].is_number_integer());
  EXPECT_TRUE(e["status_id"].is_number_integer());
  EXPECT_TRUE(e["time"].is_number_integer());
  EXPECT_TRUE(e["class_name"].is_string());
  EXPECT_TRUE(e["activity_name"].is_string());
}

TEST(AuditEvents, ApiActivityNamesTheActorAndTheRoutePatternNeverAKey) {
  ApiCall c{1700000000123, "POST", "/execute", 200, "alice", "shared", "alice-3f2a", "10.0.0.9", 12.0, std::nullopt};
  json e = api_activity(c);
  stamp(e, "0.1.0");
  expect_base(e, 6003, 1);
  EXPECT_EQ(e["time"], 1700000000123);
  EXPECT_EQ(e["status_id"], 1);
  EXPECT_EQ(e["actor"]["user"]["uid"], "alice");
  EXPECT_EQ(e["actor"]["user"]["account"]["name"], "alice-3f2a");
  EXPECT_EQ(e["api"]["operation"], "/execute");
  EXPECT_EQ(e["http_request"]["http_method"], "POST");
  EXPECT_EQ(e["unmapped"]["key_kind"], "shared");
  EXPECT_EQ(e["src_endpoint"]["ip"], "10.0.0.9");
  EXPECT_EQ(e["metadata"]["version"], "1.3.0");
  EXPECT_EQ(e["metadata"]["product"]["name"], "agentbox");
  EXPECT_EQ(e["metadata"]["product"]["vendor_name"], "agentbox");
  EXPECT_EQ(e["metadata"]["product"]["version"], "0.1.0");
  c.status = 404;
  EXPECT_EQ(api_activity(c)["status_id"], 2);
  c.method = "DELETE";
  EXPECT_EQ(api_activity(c)["type_uid"], 600304);
}

TEST(AuditEvents, EachClassHasItsNumbers) {
  expect_base(authentication({1, "GET", "/files/list", 401, true, "bob", "127.0.0.1"}), 3002, 1);
  EXPECT_EQ(authentication({1, "GET", "/files/list", 401, true, "bob", "127.0.0.1"})["status_id"], 2);
  NetDecision refused{1, false, "tunnel", "a-1", "alice", "127.0.0.1", 9, "", false, "private address", 0, 0};
  json n = network_activity(refused);
  expect_base(n, 4001, 5);
  EXPECT_EQ(n["disposition"], "Blocked");
  EXPECT_EQ(n["firewall_rule"]["name"], "private address");
  EXPECT_EQ(n["dst_endpoint"]["port"], 9);
  NetDecision call{1, true, "gateway", "a-1", "alice", "api.anthropic.com", 443, "1.2.3.4", true, "-> 200", 10, 20};
  json g = network_activity(call);
  expect_base(g, 4002, 6);
  EXPECT_EQ(g["traffic"]["bytes"], 30);
  expect_base(process_activity({1, true, "a-1", 7, "sh -c true", std::nullopt, false}), 1007, 1);
  json t = process_activity({1, false, "a-1~dev", 7, "", 3, false});
  expect_base(t, 1007, 2);
  EXPECT_EQ(t["exit_code"], 3);
  EXPECT_EQ(t["actor"]["user"]["name"], "a-1");
  expect_base(account_change({1, AccountActivity::create, "a-1", "alice"}), 3001, 1);
  expect_base(account_change({1, AccountActivity::remove, "a-1", "alice"}), 3001, 6);
  EXPECT_EQ(account_change({1, AccountActivity::restore, "a-1", "alice"})["activity_name"], "Restore");
  // A forget is the daemon's own doing, not the operator's nor the user's.
  json forget = account_change({1, AccountActivity::forget, "a-1", "alice"});
  expect_base(forget, 3001, 99);
  EXPECT_EQ(forget["activity_name"], "Forget");
  EXPECT_EQ(forget["user"]["uid"], "alice");
  EXPECT_EQ(forget["actor"]["user"]["type"], "System");
  EXPECT_EQ(account_change({1, AccountActivity::remove, "a-1", "alice"})["actor"]["user"]["type"], "Admin");
}

TEST(AuditEvents, ALaunchThatFailedIsAFailureWithItsReasonAndNoPid) {
  // A command whose box never started (or that init refused): Launch, Failure, Medium, why.
  ProcessEvent failed{
      1, true, "stuck-1", 0, "sh -c echo never", std::nullopt, false, "box stuck-1 did not start within 3 s"};
  json e = process_activity(failed);
  expect_base(e, 1007, 1);
  EXPECT_EQ(e["status_id"], 2);
  EXPECT_EQ(e["status"], "Failure");
  EXPECT_EQ(e["severity_id"], 3);
  EXPECT_EQ(e["status_detail"], "box stuck-1 did not start within 3 s");
  EXPECT_EQ(e["process"]["cmd_line"], "sh -c echo never");
  EXPECT_FALSE(e["process"].contains("pid"));  // none was made
  EXPECT_EQ(e["actor"]["user"]["name"], "stuck-1");
  EXPECT_FALSE(e.contains("exit_code"));
  // The control: the same command launched is a Success with its pid and no detail.
  json ok = process_activity({1, true, "stuck-1", 42, "sh -c echo never", std::nullopt, false});
  EXPECT_EQ(ok["status_id"], 1);
  EXPECT_EQ(ok["severity_id"], 1);
  EXPECT_EQ(ok["process"]["pid"], 42);
  EXPECT_FALSE(ok.contains("status_detail"));
}

TEST(AuditEvents, ExitCodesAsAShellShowsThem) {
  EXPECT_EQ(exit_code_of(3 << 8), 3);
  EXPECT_EQ(exit_code_of(9), 137);  // killed by SIGKILL
  EXPECT_EQ(command_line({"sh", "-c", "echo hi"}), "sh -c echo hi");
  EXPECT_EQ(command_line({std::string(5000, 'x')}).size(), 1024u);
}

TEST(AuditRedaction, SecretNames) {
  for (const char* name : {"api_key", "X-Api-Key", "Authorization", "password", "client_secret", "access_token",
                           "Cookie", "Set-Cookie", "X-OpenWebUI-User-Jwt", "credentials"})
    EXPECT_TRUE(is_secret_name(name)) << name;
  for (const char* name : {"command", "path", "cwd", "content", "X-User-Id"})
    EXPECT_FALSE(is_secret_name(name)) << name;
}

TEST(AuditRedaction, JsonBodiesByKeyAtAnyDepth) {
  const std::string out =
      redact_body(R"({"command":"ls","env":{"API_KEY":"sk-live-1","nested":[{"password":"hunter2"}]},"token":42})");
  EXPECT_THAT(out, Not(HasSubstr("sk-live-1")));
  EXPECT_THAT(out, Not(HasSubstr("hunter2")));
  EXPECT_THAT(out, Not(HasSubstr("42")));
  EXPECT_THAT(out, HasSubstr(R"("command":"ls")"));
  EXPECT_EQ(json::parse(out)["env"]["API_KEY"], "[REDACTED]");
}

TEST(AuditRedaction, TextAndCutBodiesByNameValue) {
  EXPECT_EQ(redact_body("user=al&password=hunter2&x=1"), "user=al&password=[REDACTED]&x=1");
  const std::string cut_json = R"({"secret": "abc\"def", "path": ")" + std::string(70000, 'p');
  const std::string out = redact_body(cut_json);  // not JSON any more: scanned as text
  EXPECT_THAT(out, Not(HasSubstr("abc")));
  EXPECT_THAT(out, HasSubstr(R"("path")"));
  EXPECT_LE(out.size(), kBodyLimit);
  EXPECT_EQ(redact_body("Authorization: Bearer abcdef\r\nHost: x"), "Authorization: [REDACTED]\r\nHost: x");
}

TEST(AuditRedaction, BodiesCutAt4KiBOnACharacterBoundary) {
  std::string body = "[\"" + std::string(4093, 'a') + "\xc3\xa9\xc3\xa9\"]";
  const std::string out = redact_body(body);
  EXPECT_LE(out.size(), kBodyLimit);
  EXPECT_NO_THROW((void)json(out).dump());  // valid UTF-8
}

TEST(AuditRedaction, HeadersByName) {
  boost::beast::http::fields h;
  h.set("Authorization", "Bearer topsecret");
  h.set("Cookie", "session=abc");
  h.set("X-User-Id", "alice");
  h.set("X-OpenWebUI-User-Jwt", "eyJ.x.y");
  const json out = redact_headers(h);
  EXPECT_EQ(out["authorization"], "[REDACTED]");
  EXPECT_EQ(out["cookie"], "[REDACTED]");
  EXPECT_EQ(out["x-openwebui-user-jwt"], "[REDACTED]");
  EXPECT_EQ(out["x-user-id"], "alice");
  EXPECT_THAT(out.dump(), Not(HasSubstr("topsecret")));
}

TEST(AuditFile, CutsATornLastLineAtOpenAndAppendsWholeLines) {
  testing::ScratchDir dir("audit-file");
  const std::string path = dir.path() + "/a/audit.jsonl";
  {
    std::filesystem::create_directories(dir.path() + "/a");
    std::ofstream(path) << "{\"a\":1}\n{\"b\":";
  }
  AuditFile file({path, 0, 5, 0});
  ASSERT_EQ(file.open(), 0);
  ASSERT_EQ(file.append("{\"c\":3}\n"), 0);
  EXPECT_EQ(slurp(path), "{\"a\":1}\n{\"c\":3}\n");
}

TEST(AuditFile, RotatesBySizeKeepingMaxFiles) {
  testing::ScratchDir dir("audit-rotate");
  const std::string path = dir.path() + "/audit.jsonl";
  AuditFile file({path, 100, 2, 0});
  const std::string line = std::string(59, 'x') + "\n";  // 60 bytes: one a file
  for (int i = 0; i < 5; ++i) ASSERT_EQ(file.append(line), 0);
  EXPECT_EQ(slurp(path), line);
  EXPECT_EQ(slurp(path + ".1"), line);
  EXPECT_EQ(slurp(path + ".2"), line);
  EXPECT_FALSE(std::filesystem::exists(path + ".3"));
}

TEST(AuditFile, AFullDeviceIsReportedAndLeavesNoPartOfALine) {
  AuditFile file({"/dev/full", 0, 0, 0});
  EXPECT_EQ(file.append("{\"a\":1}\n"), ENOSPC);
}

TEST(AuditTrail, WritesOneLineAnEventAndCountsThem) {
  testing::ScratchDir dir("audit-trail");
  TrailOptions o;
  o.level = Level::metadata;
  o.file.path = dir.path() + "/audit.jsonl";
  o.product_version = "9.9";
  o.scrub = {"the-operators-api-key-0123456789"};
  const auto before = stats().events[static_cast<size_t>(EventClass::account)].load();
  start(std::move(o));
  account(AccountActivity::create, "acc-the-operators-api-key-0123456789", "u1");
  stop();
  account(AccountActivity::create, "after", "u2");  // stopped: dropped silently
  const std::string text = slurp(dir.path() + "/audit.jsonl");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  const json e = json::parse(text);
  EXPECT_EQ(e["class_uid"], 3001);
  EXPECT_EQ(e["metadata"]["product"]["version"], "9.9");
  EXPECT_THAT(text, Not(HasSubstr("the-operators-api-key")));  // scrubbed wherever it lands
  EXPECT_EQ(stats().events[static_cast<size_t>(EventClass::account)].load(), before + 1);
}

}  // namespace
}  // namespace agentbox::audit
