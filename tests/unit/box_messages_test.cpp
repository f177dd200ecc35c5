// The typed messages between daemon, zygote and init (box/messages.hpp): every message survives
// its wire form, and what breaks the schema is refused with a reason, never half-read.
#include "box/messages.hpp"

#include <gtest/gtest.h>

namespace agentbox::protocol {
namespace {

using nlohmann::json;

BoxSpec sample_spec() {
  BoxSpec s;
  s.name = "alice-1a2b3c";
  s.hostname = "agentbox";
  s.uid = s.gid = 1000042;
  s.home_source = "/var/lib/agentbox/homes/alice-1a2b3c";
  s.home_target = "/home/alice-1a2b3c";
  s.binds = {{"/opt/data", "/data", false}};
  s.limits.memory_bytes = 1 << 30;
  return s;
}

template <class M, class Set>
M round_trip(const M& m) {
  const json wire = json::parse(encode(m).dump());
  Set decoded = decode<Set>(wire);
  EXPECT_TRUE(std::holds_alternative<M>(decoded)) << wire.dump();
  return std::get<M>(decoded);
}

TEST(BoxMessages, EveryMessageSurvivesItsWireForm) {
  StartBox start;
  start.spec = sample_spec();
  start.has_netns = true;
  start.await_cgroup = true;
  start.etc = EtcSource::parent_tree;
  start.etc_tree_dirs = {"ssl", "alternatives"};
  const StartBox s2 = decode_as<StartBox>(json::parse(encode(start).dump()));
  EXPECT_EQ(s2.spec.name, start.spec.name);
  EXPECT_EQ(s2.spec.binds.size(), 1u);
  EXPECT_EQ(s2.spec.limits.memory_bytes, start.spec.limits.memory_bytes);
  EXPECT_TRUE(s2.has_netns);
  EXPECT_TRUE(s2.await_cgroup);
  EXPECT_EQ(s2.etc, EtcSource::parent_tree);
  EXPECT_EQ(s2.etc_tree_dirs, start.etc_tree_dirs);
  EXPECT_FALSE(s2.hold_before_ready);

  Spawn spawn{7, {}};
  spawn.req.argv = {"sh", "-c", "echo hi"};
  spawn.req.env = {"PATH=/usr/bin"};
  spawn.req.tty = false;
  const auto spawn2 = round_trip<Spawn, InitRequest>(spawn);
  EXPECT_EQ(spawn2.id, 7u);
  EXPECT_EQ(spawn2.req.argv, spawn.req.argv);
  EXPECT_FALSE(spawn2.req.tty);

  EXPECT_EQ((round_trip<Signal, InitRequest>({9, 7, 15}).spawn), 7u);
  EXPECT_TRUE((round_trip<Signal, InitRequest>({9, 7, 15, true}).whole_session));
  EXPECT_EQ((round_trip<ListPorts, InitRequest>({13}).id), 13u);
  const auto ports = round_trip<Ports, InitReply>({13, {{8124, 7, "python3"}, {3000, 0, ""}}});
  EXPECT_EQ(ports.ports, (std::vector<ListeningPort>{{8124, 7, "python3"}, {3000, 0, ""}}));
  EXPECT_EQ((round_trip<CountProcesses, InitRequest>({11}).id), 11u);
  EXPECT_TRUE((round_trip<CgroupJoined, InitRequest>({true}).join_self));
  EXPECT_FALSE((round_trip<CgroupJoined, InitRequest>({false}).join_self));
  EXPECT_EQ((round_trip<Ready, InitReply>({7}).landlock_abi), 7);
  EXPECT_EQ((round_trip<StartFailed, InitReply>({"mounts: no /usr"}).message), "mounts: no /usr");
  EXPECT_EQ((round_trip<Spawned, InitReply>({7, 42}).pid), 42);
  EXPECT_EQ((round_trip<SpawnFailed, InitReply>({7, "nope: No such file", ENOENT}).err), ENOENT);
  EXPECT_EQ((round_trip<SpawnFailed, InitReply>({7, "no pty", ENOSPC}).cause), SpawnFailure::command);
  EXPECT_EQ((round_trip<SpawnFailed, InitReply>({7, "all 4", ENOSPC, SpawnFailure::box_ptys}).cause),
            SpawnFailure::box_ptys);
  EXPECT_EQ((round_trip<SpawnFailed, InitReply>({7, "host", ENOSPC, SpawnFailure::host_ptys}).cause),
            SpawnFailure::host_ptys);
  EXPECT_TRUE((round_trip<Signalled, InitReply>({9, true}).delivered));
  EXPECT_EQ((round_trip<ProcessCount, InitReply>({11, 3}).count), 3);
  EXPECT_EQ((round_trip<Refused, InitReply>({12, "no"}).message), "no");
  EXPECT_EQ((round_trip<Exited, InitEvent>({7, 256}).status), 256);
  const auto cloned = round_trip<Cloned, ZygoteReply>({1234, "no template"});
  EXPECT_EQ(cloned.pid, 1234);
  EXPECT_EQ(cloned.etc_template_error, "no template");
  EXPECT_EQ((round_trip<CloneFailed, ZygoteReply>({"flags not allowed", EPERM}).err), EPERM);
}

// Refused, with the reason in the message.
void expect_refused(const json& body, const std::string& reason) {
  try {
    (void)decode<InitReply>(body);
    ADD_FAILURE() << "accepted " << body.dump();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(BoxMessages, AnotherVersionIsRefused) {
  json m = encode(Ready{7});
  m["v"] = kVersion + 1;
  expect_refused(m, "unknown version");
  m.erase("v");
  expect_refused(m, "without a version");
  m["v"] = "1";
  expect_refused(m, "without a version");
}

TEST(BoxMessages, ATypeTheReceiverDoesNotExpectThereIsRefused) {
  expect_refused(encode(Spawn{1, {}}), "unexpected message 'spawn'");  // a request, where replies come
  json m = encode(Ready{7});
  m["t"] = "reboot";
  expect_refused(m, "unexpected message 'reboot'");
  m.erase("t");
  expect_refused(m, "without a type");
  expect_refused(json::array({1, 2}), "must be a JSON object");
}

TEST(BoxMessages, AMissingOrIllTypedFieldIsRefused) {
  json m = encode(Spawned{7, 42});
  m.erase("pid");
  expect_refused(m, "malformed 'spawned': missing field 'pid'");
  m = encode(Spawned{7, 42});
  m["pid"] = "42";
  expect_refused(m, "field 'pid' must be an integer");
  m["pid"] = 1e20;
  expect_refused(m, "field 'pid' must be an integer");
  m["pid"] = uint64_t{1} << 40;  // beyond pid_t
  expect_refused(m, "in range");
  m = encode(Signalled{1, true});
  m["delivered"] = 1;
  expect_refused(m, "field 'delivered' must be true or false");
  m = encode(Signalled{1, true});
  m["id"] = -1;
  expect_refused(m, "in range");
}

TEST(BoxMessages, AnUnknownSpawnFailureCauseIsRefused) {
  json m = encode(SpawnFailed{7, "no pty", ENOSPC, SpawnFailure::box_ptys});
  m["cause"] = "quota";
  expect_refused(m, "field 'cause' must be command, box_ptys or host_ptys");
  m.erase("cause");
  expect_refused(m, "missing field 'cause'");
}

TEST(BoxMessages, APortOutOfRangeIsRefused) {
  json m = encode(Ports{1, {{80, 2, "nginx"}}});
  m["ports"][0]["port"] = 70000;
  expect_refused(m, "in range");
  m["ports"] = "80";
  expect_refused(m, "field 'ports' must be a list");
}

TEST(BoxMessages, AStartWithABadSpecOrEtcSourceIsRefused) {
  StartBox start;
  start.spec = sample_spec();
  json m = encode(start);
  m["etc"] = "downloaded";
  EXPECT_THROW(decode_as<StartBox>(m), ProtocolError);
  m = encode(start);
  m["spec"].erase("uid");
  EXPECT_THROW(decode_as<StartBox>(m), ProtocolError);
  m = encode(start);
  m["spec"]["binds"] = "everything";
  EXPECT_THROW(decode_as<StartBox>(m), ProtocolError);
  EXPECT_THROW(decode_as<StartBox>(encode(Ready{1})), ProtocolError);  // the wrong message altogether
}

}  // namespace
}  // namespace agentbox::protocol
