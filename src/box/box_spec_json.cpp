#include "box/box_spec_json.hpp"

namespace agentbox {

NLOHMANN_JSON_SERIALIZE_ENUM(IdentityMode, {{IdentityMode::host_uid, "host_uid"}, {IdentityMode::user_ns, "user_ns"}})

void to_json(nlohmann::json& j, const BindMount& b) {
  j = {{"source", b.source}, {"target", b.target}, {"writable", b.writable}};
}
void from_json(const nlohmann::json& j, BindMount& b) {
  j.at("source").get_to(b.source);
  j.at("target").get_to(b.target);
  j.at("writable").get_to(b.writable);
}

void to_json(nlohmann::json& j, const Limits& l) {
  j = {{"memory_bytes", l.memory_bytes}, {"pids", l.pids},     {"cpu_millicores", l.cpu_millicores},
       {"tmp_bytes", l.tmp_bytes},       {"nofile", l.nofile}, {"nproc", l.nproc},
       {"file_size", l.file_size},       {"ptys", l.ptys},     {"tcp_memory_bytes", l.tcp_memory_bytes}};
}
void from_json(const nlohmann::json& j, Limits& l) {
  j.at("memory_bytes").get_to(l.memory_bytes);
  j.at("pids").get_to(l.pids);
  j.at("cpu_millicores").get_to(l.cpu_millicores);
  j.at("tmp_bytes").get_to(l.tmp_bytes);
  j.at("nofile").get_to(l.nofile);
  j.at("nproc").get_to(l.nproc);
  j.at("file_size").get_to(l.file_size);
  j.at("ptys").get_to(l.ptys);
  j.at("tcp_memory_bytes").get_to(l.tcp_memory_bytes);
}

void to_json(nlohmann::json& j, const BoxSpec& s) {
  j = {{"name", s.name},
       {"login", s.login},
       {"hostname", s.hostname},
       {"uid", s.uid},
       {"gid", s.gid},
       {"identity", s.identity},
       {"outer_uid", s.outer_uid},
       {"outer_gid", s.outer_gid},
       {"home_source", s.home_source},
       {"home_target", s.home_target},
       {"shell", s.shell},
       {"binds", s.binds},
       {"system_paths", s.system_paths},
       {"limits", s.limits},
       {"use_cgroup", s.use_cgroup},
       {"allow_without_landlock", s.allow_without_landlock}};
}
void from_json(const nlohmann::json& j, BoxSpec& s) {
  j.at("name").get_to(s.name);
  s.login = j.value("login", std::string());
  j.at("hostname").get_to(s.hostname);
  j.at("uid").get_to(s.uid);
  j.at("gid").get_to(s.gid);
  j.at("identity").get_to(s.identity);
  j.at("outer_uid").get_to(s.outer_uid);
  j.at("outer_gid").get_to(s.outer_gid);
  j.at("home_source").get_to(s.home_source);
  j.at("home_target").get_to(s.home_target);
  j.at("shell").get_to(s.shell);
  j.at("binds").get_to(s.binds);
  j.at("system_paths").get_to(s.system_paths);
  j.at("limits").get_to(s.limits);
  j.at("use_cgroup").get_to(s.use_cgroup);
  j.at("allow_without_landlock").get_to(s.allow_without_landlock);
}

void to_json(nlohmann::json& j, const SpawnRequest& r) {
  j = {{"argv", r.argv}, {"env", r.env}, {"cwd", r.cwd}, {"tty", r.tty}, {"rows", r.rows}, {"cols", r.cols}};
  if (!r.shell_fallback.empty()) j["shell_fallback"] = r.shell_fallback;
}
void from_json(const nlohmann::json& j, SpawnRequest& r) {
  j.at("argv").get_to(r.argv);
  j.at("env").get_to(r.env);
  j.at("cwd").get_to(r.cwd);
  j.at("tty").get_to(r.tty);
  j.at("rows").get_to(r.rows);
  j.at("cols").get_to(r.cols);
  if (auto it = j.find("shell_fallback"); it != j.end()) it->get_to(r.shell_fallback);
}

}  // namespace agentbox
