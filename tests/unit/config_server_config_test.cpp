// `agentbox serve` configuration: defaults, file, environment, validation and the API key.
#include "config/server_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using namespace std::chrono_literals;

class ServerConfigTest : public ::testing::Test {
 protected:
  std::string write_config(const std::string& text, const std::string& name = "config.toml") {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // An environment the test controls instead of the process's.
  GetEnv env_of(const std::map<std::string, std::string>& vars) {
    env_ = vars;
    return [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }

  testing::ScratchDir scratch_{"agentbox-server-config"};
  const std::string dir_ = scratch_.path();
  std::map<std::string, std::string> env_;
};

TEST_F(ServerConfigTest, DefaultsWithoutFileOrEnvironment) {
  ServerConfig c = load_server_config(std::nullopt, env_of({}));
  EXPECT_EQ(c.listen, "127.0.0.1:8000");
  EXPECT_EQ(c.state_dir, "./agentbox-state");
  EXPECT_FALSE(c.api_key);
  EXPECT_THAT(c.cors_origins, ElementsAre("*"));
  EXPECT_EQ(c.limits.body_bytes, 100ull << 20);
  EXPECT_EQ(c.limits.header_timeout, 10s);
  EXPECT_EQ(c.accounts.uid_base, 1000000u);
  EXPECT_EQ(c.accounts.uid_count, 65536u);
  EXPECT_EQ(c.accounts.idle_timeout, 900s);
  EXPECT_EQ(c.accounts.max_active, 1000u);
  EXPECT_EQ(c.accounts.start_timeout, 30s);
  EXPECT_EQ(c.accounts.file_ops, 2u);
  EXPECT_EQ(c.accounts.open_homes, 256u);
  EXPECT_EQ(c.accounts.spare_volumes, 2u);
  EXPECT_EQ(c.accounts.new_per_minute, 600u);
  EXPECT_EQ(c.accounts.max_accounts, 0u);
  EXPECT_EQ(c.box.memory_bytes, 2ull << 30);
  EXPECT_EQ(c.box.pids, 1024u);
  EXPECT_EQ(c.box.cpu_millicores, 2000u);
  EXPECT_EQ(c.box.tmp_bytes, 512ull << 20);
  EXPECT_EQ(c.box.ptys, 256u);
  EXPECT_EQ(c.box.tcp_memory_bytes, 64ull << 20);
  EXPECT_EQ(c.exec.output_cap, 16ull << 20);
  EXPECT_EQ(c.exec.retention, 3600s);
  EXPECT_EQ(c.terminals.max_per_account, 16u);
  EXPECT_EQ(c.terminals.idle_timeout, 3600s);
  EXPECT_EQ(c.proxy.connect_timeout, 10s);
  EXPECT_EQ(c.proxy.response_timeout, 60s);
  EXPECT_EQ(c.proxy.idle_timeout, 300s);
  EXPECT_EQ(c.proxy.tunnel_idle_timeout, 3600s);
  EXPECT_EQ(c.egress_proxy.port, 3128u);
  EXPECT_EQ(c.egress_proxy.connections, 64u);
  EXPECT_EQ(c.egress_proxy.connect_timeout, 10s);
  EXPECT_EQ(c.egress_proxy.idle_timeout, 300s);
  EXPECT_EQ(c.egress_proxy.tunnel_idle_timeout, 3600s);
  EXPECT_EQ(c.egress_proxy.log_rows, 10'000u);
  EXPECT_EQ(c.egress_proxy.connect_rate, 20u);
  EXPECT_EQ(c.egress_proxy.socket_buffer, 512u << 10);
}

TEST_F(ServerConfigTest, FileOverridesEveryDefault) {
  std::string path = write_config(R"(
listen = "[::1]:9000"
state_dir = "/var/lib/agentbox"
api_key = "file-key-0123456789abcdef0123456789"
cors_origins = ["https://chat.example"]
[limits]
body = "10M"
header_timeout = 5
[accounts]
uid_base = 2000000
uid_count = 100
idle_timeout = 60
max_active = 50
start_timeout = 5
file_ops = 8
open_homes = 1000
spare_volumes = 5
[box]
memory = "1G"
pids = 256
cpu = "500m"
tmp = "64M"
[exec]
output_cap = "1M"
retention = 60
[terminals]
max_per_account = 4
idle_timeout = 120
[proxy]
connect_timeout = 3
response_timeout = 4
idle_timeout = 5
tunnel_idle_timeout = 6
[egress]
port = 8888
connections = 7
connect_timeout = 8
idle_timeout = 9
tunnel_idle_timeout = 11
log_rows = 500
connect_rate = 0
socket_buffer = "1M"
[policy.default]
)");
  ServerConfig c = load_server_config(path, env_of({}));
  EXPECT_EQ(c.listen, "[::1]:9000");
  EXPECT_EQ(c.state_dir, "/var/lib/agentbox");
  EXPECT_EQ(c.api_key, "file-key-0123456789abcdef0123456789");
  EXPECT_THAT(c.cors_origins, ElementsAre("https://chat.example"));
  EXPECT_EQ(c.limits.body_bytes, 10ull << 20);
  EXPECT_EQ(c.limits.header_timeout, 5s);
  EXPECT_EQ(c.accounts.uid_base, 2000000u);
  EXPECT_EQ(c.accounts.uid_count, 100u);
  EXPECT_EQ(c.accounts.idle_timeout, 60s);
  EXPECT_EQ(c.accounts.max_active, 50u);
  EXPECT_EQ(c.accounts.start_timeout, 5s);
  EXPECT_EQ(c.accounts.file_ops, 8u);
  EXPECT_EQ(c.accounts.open_homes, 1000u);
  EXPECT_EQ(c.accounts.spare_volumes, 5u);
  EXPECT_EQ(c.box.memory_bytes, 1ull << 30);
  EXPECT_EQ(c.box.pids, 256u);
  EXPECT_EQ(c.box.cpu_millicores, 500u);
  EXPECT_EQ(c.box.tmp_bytes, 64ull << 20);
  EXPECT_EQ(c.exec.output_cap, 1ull << 20);
  EXPECT_EQ(c.exec.retention, 60s);
  EXPECT_EQ(c.proxy.connect_timeout, 3s);
  EXPECT_EQ(c.proxy.response_timeout, 4s);
  EXPECT_EQ(c.proxy.idle_timeout, 5s);
  EXPECT_EQ(c.proxy.tunnel_idle_timeout, 6s);
  EXPECT_EQ(c.egress_proxy.port, 8888u);
  EXPECT_EQ(c.egress_proxy.connections, 7u);
  EXPECT_EQ(c.egress_proxy.connect_timeout, 8s);
  EXPECT_EQ(c.egress_proxy.idle_timeout, 9s);
  EXPECT_EQ(c.egress_proxy.tunnel_idle_timeout, 11s);
  EXPECT_EQ(c.egress_proxy.log_rows, 500u);
  EXPECT_EQ(c.egress_proxy.connect_rate, 0u);
  EXPECT_EQ(c.egress_proxy.socket_buffer, 1u << 20);
  EXPECT_EQ(c.terminals.max_per_account, 4u);
  EXPECT_EQ(c.terminals.idle_timeout, 120s);
}

TEST_F(ServerConfigTest, TerminalKeysAreCheckedAndTakeTheirBounds) {
  ServerConfig c = load_server_config(
      write_config("[terminals]\nmax_per_account = 1024\nidle_timeout = 1\n", "bounds.toml"), env_of({}));
  EXPECT_EQ(c.terminals.max_per_account, 1024u);
  EXPECT_EQ(c.terminals.idle_timeout, 1s);
  std::string path = write_config("[terminals]\nmax_per_account = 0\nidle_timeout = 0\nmax_open = 3\n", "bad.toml");
  std::vector<std::string> errors = validate_config_file(path);
  ASSERT_EQ(errors.size(), 3u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0], path + ": terminals.max_per_account: must be between 1 and 1024, not 0 (line 2)");
  EXPECT_EQ(errors[1], path + ": terminals.idle_timeout: must be between 1 and 2147483647, not 0 (line 3)");
  EXPECT_EQ(errors[2], path + ": unknown key \"terminals.max_open\" (line 4)");
  EXPECT_THAT(validate_config_file(write_config("[terminals]\nmax_per_account = 1025\n", "big.toml")),
              ElementsAre(HasSubstr("terminals.max_per_account: must be between 1 and 1024, not 1025")));
}

TEST_F(ServerConfigTest, EgressBoundsAreCheckedSayingWhatTheyTake) {
  EXPECT_EQ(load_server_config(write_config("[egress]\nsocket_buffer = 0\n", "auto.toml"), env_of({}))
                .egress_proxy.socket_buffer,
            0u);  // the kernel's autotuning, asked for
  std::string path =
      write_config("[egress]\nlog_rows = 99\nconnect_rate = -1\nsocket_buffer = \"4K\"\n", "bad-egress.toml");
  EXPECT_THAT(validate_config_file(path),
              ElementsAre(HasSubstr("egress.log_rows: must be between 100 and 10000000, not 99 (line 2)"),
                          HasSubstr("egress.connect_rate: must be between 0 and 100000, not -1 (line 3)"),
                          HasSubstr("egress.socket_buffer: expected 0 (the kernel's autotuning) or a size from 8K "
                                    "to 64M (line 4)")));
  EXPECT_THAT(validate_config_file(write_config("[egress]\nsocket_buffer = \"65M\"\nlog_row = 5\n", "big.toml")),
              ElementsAre(HasSubstr("egress.socket_buffer"), HasSubstr("unknown key \"egress.log_row\"")));
}

// The box's share of the host's pty pool and TCP memory: devpts takes max= up to 2^20; a TCP
// bound under 1M would stall the box's first connections, so it is 0 (none) or at least that.
TEST_F(ServerConfigTest, PtyAndTcpMemoryKeysAreCheckedAndTakeTheirBounds) {
  ServerConfig c =
      load_server_config(write_config("[box]\nptys = 1048576\ntcp_memory = \"1M\"\n", "bounds.toml"), env_of({}));
  EXPECT_EQ(c.box.ptys, 1048576u);
  EXPECT_EQ(c.box.tcp_memory_bytes, 1ull << 20);
  c = load_server_config(write_config("[box]\nptys = 1\ntcp_memory = \"0\"\n", "small.toml"), env_of({}));
  EXPECT_EQ(c.box.ptys, 1u);
  EXPECT_EQ(c.box.tcp_memory_bytes, 0u);
  const std::string path = write_config("[box]\nptys = 0\ntcp_memory = \"512K\"\nptys_max = 3\n", "bad.toml");
  std::vector<std::string> errors = validate_config_file(path);
  ASSERT_EQ(errors.size(), 3u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0], path + ": box.ptys: must be between 1 and 2147483647, not 0 (line 2)");
  EXPECT_EQ(errors[1], path + ": box.tcp_memory: must be \"0\" (no separate bound) or at least \"1M\" (line 3)");
  EXPECT_EQ(errors[2], path + ": unknown key \"box.ptys_max\" (line 4)");
  EXPECT_THAT(validate_config_file(write_config("[box]\nptys = 1048577\n", "big.toml")),
              ElementsAre(HasSubstr("box.ptys: must be between 1 and 1048576, not 1048577")));
}

// The API's connection places (http/connection_table.hpp): daemon-wide and per address.
TEST_F(ServerConfigTest, ConnectionLimitsAreCheckedAndThePerAddressOneFitsUnderTheTotal) {
  ServerConfig defaults = load_server_config(std::nullopt, env_of({}));
  EXPECT_EQ(defaults.limits.connections, 10000u);
  EXPECT_EQ(defaults.limits.per_address(), 8192u);
  ServerConfig c = load_server_config(
      write_config("[limits]\nconnections = 300\nconnections_per_address = 300\n", "conns.toml"), env_of({}));
  EXPECT_EQ(c.limits.connections, 300u);
  EXPECT_EQ(c.limits.per_address(), 300u);
  std::string path = write_config("[limits]\nconnections = 0\nconnections_per_address = 1000001\n", "bad-conns.toml");
  EXPECT_THAT(
      validate_config_file(path),
      ElementsAre(path + ": limits.connections: must be between 1 and 1000000, not 0 (line 2)",
                  path + ": limits.connections_per_address: must be between 1 and 1000000, not 1000001 (line 3)"));
  path = write_config("[limits]\nconnections = 100\nconnections_per_address = 200\n", "over.toml");
  EXPECT_THAT(validate_config_file(path),
              ElementsAre(path + ": limits.connections_per_address (200) is more than limits.connections (100)"));
  // Unset, it follows a total below its default.
  EXPECT_EQ(
      load_server_config(write_config("[limits]\nconnections = 100\n", "small.toml"), env_of({})).limits.per_address(),
      100u);
}

// Download links never take a host from a request: on a wildcard listen address without
// public_url they name the address each request was sent to, which the operator hears of.
TEST_F(ServerConfigTest, AWildcardListenWithoutPublicUrlIsWarnedOf) {
  ServerConfig c;
  EXPECT_THAT(config_warnings(c), IsEmpty());
  for (const char* listen : {"0.0.0.0:8000", "[::]:8000"}) {
    c.listen = listen;
    EXPECT_THAT(config_warnings(c), ElementsAre(HasSubstr("[agent] public_url is unset"))) << listen;
  }
  c.agent.public_url = "https://agentbox.example.com";
  EXPECT_THAT(config_warnings(c), IsEmpty());
  c.agent.public_url.clear();
  c.listen = "192.0.2.7:8000";
  EXPECT_THAT(config_warnings(c), IsEmpty());
}

TEST_F(ServerConfigTest, BackupKeysAndTheAdminKey) {
  ServerConfig none = load_server_config(std::nullopt, env_of({}));
  EXPECT_EQ(none.backup.dir, "");  // no mirror unless asked for
  EXPECT_EQ(none.backup.interval, std::chrono::seconds(300));
  EXPECT_EQ(none.backup.keep_deleted_days, 7u);
  EXPECT_FALSE(none.admin_key);
  ServerConfig c = load_server_config(write_config("admin_key = \"adm1n-0123456789abcdef0123456789abc\"\n[backup]\ndir "
                                                   "= \"mirror\"\ninterval = 1\nkeep_deleted_days = 30\n",
                                                   "backup.toml"),
                                      env_of({}));
  EXPECT_EQ(c.backup.dir, dir_ + "/mirror");  // relative: next to the file
  EXPECT_EQ(c.backup.interval, std::chrono::seconds(1));
  EXPECT_EQ(c.backup.keep_deleted_days, 30u);
  EXPECT_EQ(c.admin_key, "adm1n-0123456789abcdef0123456789abc");
  EXPECT_EQ(load_server_config(std::nullopt, env_of({{"AGENTBOX_ADMIN_KEY", "from-env-0123456789abcdef0123456789"}}))
                .admin_key,
            "from-env-0123456789abcdef0123456789");
  EXPECT_THAT(validate_config_file(write_config("[backup]\nkeep_deleted_days = 0\n", "zero.toml")),
              ElementsAre(HasSubstr("backup.keep_deleted_days")));
  EXPECT_THAT(
      validate_config_file(write_config(
          "api_key = \"same-0123456789abcdef0123456789abcd\"\nadmin_key = \"same-0123456789abcdef0123456789abcd\"\n",
          "same.toml")),
      ElementsAre(HasSubstr("admin_key is the same as api_key")));
}

TEST_F(ServerConfigTest, EnvironmentOverridesFileWhichOverridesDefaults) {
  std::string path = write_config("listen = \"127.0.0.1:9001\"\nstate_dir = \"/from/file\"\n");
  ServerConfig c = load_server_config(path, env_of({{"AGENTBOX_LISTEN", "127.0.0.1:9002"},
                                                    {"AGENTBOX_API_KEY", "env-key-0123456789abcdef0123456789"},
                                                    {"AGENTBOX_CORS_ORIGINS", "https://a, https://b"}}));
  EXPECT_EQ(c.listen, "127.0.0.1:9002");                       // env beats file
  EXPECT_EQ(c.state_dir, "/from/file");                        // file beats default
  EXPECT_EQ(c.api_key, "env-key-0123456789abcdef0123456789");  // env beats default
  EXPECT_THAT(c.cors_origins, ElementsAre("https://a", "https://b"));
  EXPECT_EQ(c.exec.retention, 3600s);  // default stays
}

TEST_F(ServerConfigTest, ConfigPathFromFlagBeatsAgentboxConfig) {
  std::string from_env = write_config("state_dir = \"/env-file\"\n", "env.toml");
  std::string from_flag = write_config("state_dir = \"/flag-file\"\n", "flag.toml");
  EXPECT_EQ(load_server_config(std::nullopt, env_of({{"AGENTBOX_CONFIG", from_env}})).state_dir, "/env-file");
  EXPECT_EQ(load_server_config(from_flag, env_of({{"AGENTBOX_CONFIG", from_env}})).state_dir, "/flag-file");
  EXPECT_EQ(
      load_server_config(std::nullopt, env_of({{"AGENTBOX_CONFIG", from_env}, {"AGENTBOX_STATE_DIR", "/env-var"}}))
          .state_dir,
      "/env-var");
}

// A relative state_dir in a file is next to the file: the daemon may start from anywhere, and a
// relative path would end up inside boxes' mount paths (every /execute answered 500).
TEST_F(ServerConfigTest, ARelativeStateDirInAFileIsNextToTheFile) {
  const std::string path = write_config("state_dir = \"state/../agentbox-state\"\n");
  EXPECT_EQ(load_server_config(path, env_of({})).state_dir, dir_ + "/agentbox-state");
  EXPECT_TRUE(validate_config_file(path).empty());
  // Elsewhere (default, flag, environment) it is the working directory's.
  EXPECT_EQ(absolute_path("./agentbox-state"), std::filesystem::current_path().string() + "/agentbox-state");
  EXPECT_EQ(absolute_path("/srv//x/../state"), "/srv/state");
  EXPECT_EQ(absolute_path("s", "/base"), "/base/s");
}

TEST_F(ServerConfigTest, AnExplicitConfigFileMustExist) {
  EXPECT_THROW(load_server_config(dir_ + "/missing.toml", env_of({})), Error);
  EXPECT_THROW(load_server_config(std::nullopt, env_of({{"AGENTBOX_CONFIG", dir_ + "/missing.toml"}})), Error);
}

TEST_F(ServerConfigTest, BadEnvironmentValueNamesTheVariable) {
  try {
    load_server_config(std::nullopt, env_of({{"AGENTBOX_LISTEN", "localhost"}}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "AGENTBOX_LISTEN: invalid listen address \"localhost\": expected HOST:PORT");
  }
  EXPECT_THROW(load_server_config(std::nullopt, env_of({{"AGENTBOX_API_KEY", ""}})), Error);
}

// The test harness gives each daemon its own range this way (uid ranges are exclusive).
TEST_F(ServerConfigTest, UidBaseFromTheEnvironmentOverridesTheFile) {
  std::string path = write_config("[accounts]\nuid_base = 2000000\nuid_count = 1000\n");
  ServerConfig c = load_server_config(path, env_of({{"AGENTBOX_UID_BASE", "3000000"}}));
  EXPECT_EQ(c.accounts.uid_base, 3000000u);
  EXPECT_EQ(c.accounts.uid_count, 1000u);
  EXPECT_THROW(load_server_config(std::nullopt, env_of({{"AGENTBOX_UID_BASE", "0"}})), Error);
  EXPECT_THROW(load_server_config(std::nullopt, env_of({{"AGENTBOX_UID_BASE", "12x"}})), Error);
  try {
    load_server_config(std::nullopt, env_of({{"AGENTBOX_UID_BASE", "4294967000"}}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "AGENTBOX_UID_BASE: uid_base + uid_count - 1 exceeds the largest uid 4294967294");
  }
}

TEST_F(ServerConfigTest, UnknownKeysAreErrorsNamingFileAndKey) {
  std::string path = write_config(
      "listen = \"127.0.0.1:1\"\nlistn = 1\n[box]\nmemroy = \"1G\"\n[policy.default]\nallw = []\n[policy.other]\n");
  EXPECT_THAT(validate_config_file(path),
              ElementsAre(path + ": unknown key \"listn\" (line 2)", path + ": unknown key \"box.memroy\" (line 4)",
                          path + ": unknown key \"policy.default.allw\" (line 6)",
                          path + ": unknown key \"policy.other\" (line 7)"));
  try {
    load_server_config(path, env_of({}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown key \"listn\""));
  }
}

TEST_F(ServerConfigTest, BadValuesGiveOneLineEach) {
  std::string path = write_config(R"(listen = "127.0.0.1:99999"
state_dir = 7
[limits]
body = "100Q"
header_timeout = 0
[accounts]
uid_base = 0
uid_count = 1
[box]
cpu = "0"
pids = "lots"
)");
  std::vector<std::string> errors = validate_config_file(path);
  EXPECT_THAT(
      errors,
      ElementsAre(
          path + ": listen: invalid listen address \"127.0.0.1:99999\": port must be a number from 0 to 65535 (line 1)",
          path + ": state_dir: expected a string, not an integer (line 2)",
          path + ": limits.body: invalid size \"100Q\": unknown unit \"Q\" (use K, M, G or T) (line 4)",
          path + ": limits.header_timeout: must be between 1 and 2147483647, not 0 (line 5)",
          path + ": accounts.uid_base: must be between 1 and 4294967294, not 0 (line 7)",
          path + ": accounts.uid_count: must be between 2 and 4294967294, not 1 (line 8)",
          path + ": box.cpu: invalid cpu \"0\": must be at least 1m (one thousandth of a core) (line 10)",
          path + ": box.pids: expected an integer, not a string (line 11)"));
  for (const std::string& e : errors) EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST_F(ServerConfigTest, AccountBoundsTakeTheirSmallestAndLargestValues) {
  ServerConfig c =
      load_server_config(write_config("[accounts]\nmax_active = 1\nstart_timeout = 1\nfile_ops = 1\nopen_homes = 1\n"
                                      "spare_volumes = 0\n"),
                         env_of({}));
  EXPECT_EQ(c.accounts.spare_volumes, 0u) << "none made ahead";
  EXPECT_EQ(c.accounts.max_active, 1u);
  EXPECT_EQ(c.accounts.start_timeout, 1s);
  EXPECT_EQ(c.accounts.file_ops, 1u);
  EXPECT_EQ(c.accounts.open_homes, 1u);
  c = load_server_config(
      write_config("[accounts]\nfile_ops = 64\nmax_active = 100000\nopen_homes = 100000\nspare_volumes = 64\n"),
      env_of({}));
  EXPECT_EQ(c.accounts.spare_volumes, 64u);
  EXPECT_EQ(c.accounts.file_ops, 64u);
  EXPECT_EQ(c.accounts.max_active, 100000u);
  EXPECT_EQ(c.accounts.open_homes, 100000u);
}

TEST_F(ServerConfigTest, AccountAdmissionLimits) {
  ServerConfig c = load_server_config(write_config("[accounts]\nnew_per_minute = 0\nmax_accounts = 500\n"), env_of({}));
  EXPECT_EQ(c.accounts.new_per_minute, 0u) << "0: no rate limit";
  EXPECT_EQ(c.accounts.max_accounts, 500u);
  const std::string path = write_config("[accounts]\nnew_per_minute = -1\nmax_accounts = \"lots\"\n");
  const std::vector<std::string> errors = validate_config_file(path);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0], HasSubstr(path + ": accounts.new_per_minute: must be between 0 and"));
  EXPECT_THAT(errors[0], HasSubstr("(line 2)"));
  EXPECT_THAT(errors[1], HasSubstr(path + ": accounts.max_accounts:"));
  EXPECT_THAT(errors[1], HasSubstr("(line 3)"));
}

TEST_F(ServerConfigTest, BadAccountBoundsNameTheirKey) {
  std::string path = write_config(R"([accounts]
max_active = 0
start_timeout = 0
file_ops = 0
open_homes = 0
spare_volumes = 65
)");
  EXPECT_THAT(validate_config_file(path),
              ElementsAre(path + ": accounts.max_active: must be between 1 and 2147483647, not 0 (line 2)",
                          path + ": accounts.start_timeout: must be between 1 and 2147483647, not 0 (line 3)",
                          path + ": accounts.file_ops: must be between 1 and 64, not 0 (line 4)",
                          path + ": accounts.open_homes: must be between 1 and 2147483647, not 0 (line 5)",
                          path + ": accounts.spare_volumes: must be between 0 and 64, not 65 (line 6)"));

  path = write_config(R"([accounts]
max_active = "many"
start_timeout = -5
file_ops = 65
open_homes = 2.5
)");
  EXPECT_THAT(validate_config_file(path),
              ElementsAre(path + ": accounts.max_active: expected an integer, not a string (line 2)",
                          path + ": accounts.start_timeout: must be between 1 and 2147483647, not -5 (line 3)",
                          path + ": accounts.file_ops: must be between 1 and 64, not 65 (line 4)",
                          path + ": accounts.open_homes: expected an integer, not a float (line 5)"));
  EXPECT_THROW(load_server_config(path, env_of({})), Error);
}

TEST_F(ServerConfigTest, UidRangeMustFitBelowTheLargestUid) {
  std::string path = write_config("[accounts]\nuid_base = 4294967000\nuid_count = 1000\n");
  EXPECT_THAT(validate_config_file(path), ElementsAre(HasSubstr("exceeds the largest uid")));
}

TEST_F(ServerConfigTest, ValidateReportsUnreadableAndInvalidFiles) {
  EXPECT_THAT(validate_config_file(dir_ + "/missing.toml"),
              ElementsAre("open(" + dir_ + "/missing.toml): No such file or directory"));
  std::string path = write_config("[box\n");
  EXPECT_THAT(validate_config_file(path), ElementsAre(HasSubstr(path + ": invalid TOML: ")));
  EXPECT_TRUE(validate_config_file(write_config("[policy.default]\n")).empty());
}

TEST_F(ServerConfigTest, ListenAddresses) {
  ListenAddress v4 = parse_listen_address("127.0.0.1:8000");
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 8000);
  ListenAddress v6 = parse_listen_address("[::1]:0");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 0);
  for (const char* bad : {"127.0.0.1", "localhost:80", "::1:80", "[::1]", "1.2.3.4:", "1.2.3.4:-1", "1.2.3.4:8x"})
    EXPECT_THROW(parse_listen_address(bad), Error) << bad;
}

TEST_F(ServerConfigTest, ApiKeyIsGeneratedPrivateAndReused) {
  std::string state = dir_ + "/state";
  std::string key = load_or_create_api_key(state);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);

  struct stat st;
  ASSERT_EQ(::stat((state + "/api_key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  EXPECT_EQ(load_or_create_api_key(state), key);
  // No temporary files left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(state), std::filesystem::directory_iterator()), 1);
  // A fresh state dir gets a different key.
  EXPECT_NE(load_or_create_api_key(dir_ + "/other"), key);
}

TEST_F(ServerConfigTest, ConcurrentFirstStartsAgreeOnOneKey) {
  std::string state = dir_ + "/state";
  std::vector<std::string> keys(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < keys.size(); ++i) threads.emplace_back([&, i] { keys[i] = load_or_create_api_key(state); });
  for (auto& t : threads) t.join();
  for (const std::string& k : keys) EXPECT_EQ(k, keys[0]);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(state), std::filesystem::directory_iterator()), 1);
}

// A key under 32 characters is refused beyond loopback, where anyone on the network can try
// keys; on loopback (a first try, a laptop) it is accepted, with a warning to print.
TEST_F(ServerConfigTest, ShortKeysAreRefusedBeyondLoopbackOnly) {
  for (const char* listen : {"0.0.0.0:8000", "192.0.2.7:8000", "[::]:8000"}) {
    try {
      require_key_strength("api key", "changeme", listen);
      FAIL() << "an 8-character key was accepted on " << listen;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("api key is 8 characters long")) << listen;
      EXPECT_THAT(e.what(), HasSubstr("at least 32")) << listen;
    }
  }
  for (const char* listen : {"127.0.0.1:8000", "127.0.0.2:0", "[::1]:8000"})
    EXPECT_NO_THROW(require_key_strength("api key", "changeme", listen)) << listen;
  EXPECT_NO_THROW(require_key_strength("api key", std::string(32, 'k'), "0.0.0.0:8000"));
  EXPECT_THAT(short_key_warning("api key", "changeme"), Optional(HasSubstr("loopback only")));
  EXPECT_EQ(short_key_warning("api key", std::string(32, 'k')), std::nullopt);
  // `config check` says it of a file that listens beyond loopback with a short key.
  EXPECT_THAT(
      validate_config_file(write_config("listen = \"0.0.0.0:8000\"\nadmin_key = \"changeme-too\"\n", "short.toml")),
      ElementsAre(HasSubstr("admin key is 12 characters long")));
  EXPECT_THAT(validate_config_file(write_config("admin_key = \"changeme-too\"\n", "short-local.toml")), IsEmpty());
}

TEST_F(ServerConfigTest, KeyFileReadableByOthersIsRefused) {
  std::string state = dir_ + "/state";
  load_or_create_api_key(state);
  ASSERT_EQ(::chmod((state + "/api_key").c_str(), 0644), 0);
  try {
    load_or_create_api_key(state);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("readable by others (mode 644)"));
  }
}

TEST_F(ServerConfigTest, OperatorWrittenKeyFileIsUsedAsIs) {
  std::string state = dir_ + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  { std::ofstream(state + "/api_key") << "my-own-key-0123456789abcdef0123456789\n"; }
  ASSERT_EQ(::chmod((state + "/api_key").c_str(), 0600), 0);
  EXPECT_EQ(load_or_create_api_key(state), "my-own-key-0123456789abcdef0123456789");
}

TEST_F(ServerConfigTest, IdleVolumesDetachAfterFiveMinutesWithNoCapUnlessSet) {
  ServerConfig c = load_server_config(write_config(""), env_of({}));
  EXPECT_EQ(c.accounts.volume_idle, 300s);
  EXPECT_EQ(c.accounts.attached, 0u) << "no cap";
  c = load_server_config(write_config("[accounts]\nvolume_idle = 1\nattached = 2\n"), env_of({}));
  EXPECT_EQ(c.accounts.volume_idle, 1s);
  EXPECT_EQ(c.accounts.attached, 2u);
  EXPECT_THROW(load_server_config(write_config("[accounts]\nvolume_idle = 0\n"), env_of({})), Error);
  EXPECT_THROW(load_server_config(write_config("[accounts]\nvolume_idle = 86401\n"), env_of({})), Error);
  EXPECT_THROW(load_server_config(write_config("[accounts]\nattached = -1\n"), env_of({})), Error);
}

TEST_F(ServerConfigTest, AccountsAreNeverForgottenUnlessForgetAfterDaysIsSet) {
  ServerConfig c = load_server_config(write_config(""), env_of({}));
  EXPECT_EQ(c.accounts.forget_after_days, 0u) << "never";
  c = load_server_config(write_config("[accounts]\nforget_after_days = 90\n"), env_of({}));
  EXPECT_EQ(c.accounts.forget_after_days, 90u);
  EXPECT_THROW(load_server_config(write_config("[accounts]\nforget_after_days = -1\n"), env_of({})), Error);
  EXPECT_THROW(load_server_config(write_config("[accounts]\nforget_after_days = 36501\n"), env_of({})), Error);
}

}  // namespace
}  // namespace agentbox
