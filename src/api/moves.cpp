#include "api/moves.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "accounts/workspaces.hpp"
#include "api/accounts.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "audit/trail.hpp"
#include "fs/entry_ops.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/request.hpp"
#include "http/takeover_response.hpp"
#include "metrics/events.hpp"
#include "moves/records.hpp"
#include "moves/transfer.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/log.hpp"
#include "util/random_hex.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

constexpr size_t kMoveIdBytes = 16;
constexpr const char* kStaging = ".move-in";  // in the target's volume: renames into place stay in it
// What a move carries besides files, tar'd with them: its records (moves/records.hpp).
constexpr size_t kMaxRecordsBytes = 256 << 20;

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + path + ")");
}

// Deletes path (a tree) if it exists, links as links.
void remove_path(const std::string& path) {
  if (!exists(path)) return;
  const size_t slash = path.rfind('/');
  UniqueFd parent(::open(path.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) throw sys_error("open(" + path.substr(0, slash) + ")");
  remove_tree_at(parent.get(), path.substr(slash + 1), path);
}

bool valid_move_id(std::string_view id) {
  if (id.size() != 2 * kMoveIdBytes) return false;
  for (char ch : id)
    if (!std::isxdigit(static_cast<unsigned char>(ch)) || std::isupper(static_cast<unsigned char>(ch))) return false;
  return true;
}

std::string node_list(const ClusterConfig& config) {
  std::string out;
  for (const ClusterNode& n : config.nodes) out += (out.empty() ? "" : ", ") + n.name;
  return out;
}

class Mover {
 public:
  explicit Mover(Services s) : s_(std::move(s)) {}

  // POST /admin/moves on the source.
  Response start(const Request& req) {
    nlohmann::json body = parse_json_object(req);
    if (!body.contains("user") || !body["user"].is_string() || body["user"].get<std::string>().empty())
      unprocessable("user: the account name or user id to move");
    if (!body.contains("to") || !body["to"].is_string()) unprocessable("to: the name of the node to move to");
    const std::string user = body["user"].get<std::string>(), to = body["to"].get<std::string>();
    auto placement = s_.placement->placement();
    const ClusterNode* target = placement->config().node(to);
    if (!target)
      throw HttpError(http::status::bad_request,
                      "Unknown node: " + to + " (the cluster has " + node_list(placement->config()) + ")");
    const std::string self = s_.placement->node();

    std::lock_guard lock(out_mu_);
    std::optional<Account> account = s_.accounts->find_by_name_or_id(user);
    const std::string external_id = account ? account->external_id : user;
    std::optional<MoveOut> move = s_.moves->open_out(external_id);
    if (!account && !move) {
      // Moved already: a rerun (the CLI died before writing the pin) finishes the activation.
      std::optional<MoveOut> done;
      for (const MoveOut& m : s_.moves->outs())
        if (m.external_id == user && m.state == "moved") done = m;
      if (done && done->to_node == to) return finish(*done, *target);
      if (done) throw HttpError(http::status::conflict, "user " + user + " moved to node " + done->to_node);
      throw HttpError(http::status::not_found, "Unknown user: " + user + " (node " + self + " holds no such account)");
    }
    if (to == self)
      throw HttpError(http::status::bad_request, "user " + user + " is on node " + self + " already: nothing to move");
    if (move && move->to_node != to)
      throw HttpError(http::status::conflict, "user " + user + " is being moved to " + move->to_node +
                                                  "; finish that move first (agentbox accounts move " + user +
                                                  " --to " + move->to_node + ")");
    if (!move) {
      move = MoveOut{
          random_hex(kMoveIdBytes), account->external_id, account->name, to, target->server, "moving", unix_now()};
      s_.moves->insert_out(*move);
      s_.move_gate->reload();  // from here the user's requests get the 503
      log::info("moves", "move {}: account {} ({}) to node {} begins", move->id, account->name, account->external_id,
                to);
    } else {
      log::info("moves", "move {}: account {} to node {} resumes ({})", move->id, move->name, to, move->state);
    }
    if (move->state == "moving") send(*move, account, *target);
    if (move->state == "sent") tombstone(*move);
    return finish(*move, *target);
  }

  // PUT /admin/moves/{id} on the target: the archive is read from the connection as it arrives.
  Response receive(Takeover& upload) {
    const Request& req = upload.request;
    const std::string id = req.param("id");
    if (!valid_move_id(id)) throw HttpError(http::status::bad_request, "Bad move id: " + id);
    const std::optional<std::string> user = req.query_param("user"), from = req.query_param("from");
    if (!user || user->empty() || !from || from->empty())
      throw HttpError(http::status::bad_request, "PUT /admin/moves/{id} needs ?user=USER&from=NODE");
    if (upload.parser->is_done()) throw HttpError(http::status::bad_request, "The move's archive is missing");

    std::lock_guard lock(in_mu_);
    std::optional<MoveIn> move = s_.moves->in(id);
    if (move && move->state != "receiving") return answer_in(place(*move));
    if (move && move->external_id != *user)
      throw HttpError(http::status::conflict, "move " + id + " is of another user");
    if (!move) {
      const std::string self = s_.placement->node();
      if (s_.moves->open_out(*user))
        throw HttpError(http::status::conflict, "user " + *user + " is being moved away from node " + self);
      move = MoveIn{id, *user, "", *from, "receiving", unix_now()};
      s_.moves->insert_in(*move);
      s_.move_gate->reload();  // the user's requests get the 503 here from now on
      // Checked after the gate closed, so no request can have made the account in between.
      if (s_.accounts->find(*user)) {
        s_.moves->remove_in(id);
        s_.move_gate->reload();
        throw HttpError(http::status::conflict, "user " + *user + " already has an account on node " + self +
                                                    ": an account is never on two nodes");
      }
      log::info("moves", "move {}: receiving {} from node {}", id, *user, *from);
    }
    // Made by this move (or by its earlier, interrupted attempt): a uid of this node's range.
    const Account account = s_.accounts->get_or_create(*user);
    const VolumeLease lease = s_.callers->lease_volume(account);  // the volume stays attached meanwhile
    const VolumePaths& v = lease.paths();
    const std::string staging = v.root + "/" + kStaging;
    remove_path(staging);  // an interrupted attempt's
    make_dir(staging);
    try {
      moves::receive_archive(upload, staging);
    } catch (const Error& e) {
      // A volume too small for what arrives is the operator's to fix (a bigger quota here).
      const std::string why = e.what();
      if (why.find("No space left") == std::string::npos && why.find("quota exceeded") == std::string::npos) throw;
      throw HttpError(http::status::insufficient_storage,
                      "the files of " + *user + " do not fit their volume here (" + why + ")");
    }
    moves::move_test_pause("unpacked");

    nlohmann::json doc = nlohmann::json::parse(read_file(staging + "/move.json", kMaxRecordsBytes), nullptr, false);
    if (!doc.is_object() || doc.value("user", "") != *user)
      throw HttpError(http::status::bad_request, "The archive's move.json is missing or for another user");
    MovedRecords records = moves::records_from_json(doc);
    for (ProcessRecord& p : records.processes) {
      p.account = account.name;
      p.log_path = v.daemon + "/logs/" + p.log_path.substr(p.log_path.rfind('/') + 1);
    }
    for (const char* part : {"home", "trash"})
      if (exists(staging + "/" + part)) moves::reown_tree(staging + "/" + part, account.uid, account.gid);
    // Contexts' workspaces (accounts/workspaces.hpp): each the account's; their parents and
    // records stay the daemon's, as tar made them.
    for (const accounts::Workspace& w : accounts::list_workspaces(staging, false))
      moves::reown_tree(accounts::workspace_dir(staging, w.profile, w.hash), account.uid, account.gid);
    s_.moves->commit_in(id, account.name, records);  // the commit point
    log::info("moves", "move {}: {} committed as {} (uid {})", id, *user, account.name, account.uid);
    moves::move_test_pause("committed");
    move->name = account.name;
    move->state = "committed";
    return answer_in(place(*move));
  }

  // POST /admin/moves/{id}/activate on the target.
  Response activate(const Request& req) {
    const std::string id = req.param("id");
    std::lock_guard lock(in_mu_);
    std::optional<MoveIn> move = s_.moves->in(id);
    if (!move) throw HttpError(http::status::not_found, "Unknown move: " + id);
    if (move->state == "receiving")
      throw HttpError(http::status::conflict, "move " + id + " is not committed on this node yet");
    const Account account = place(*move);
    if (move->state != "active") {
      s_.moves->set_in_state(id, "active", unix_now());
      s_.move_gate->reload();
      log::info("moves", "move {}: {} is served here from now on", id, move->external_id);
      metrics::add(metrics::events().moves_activated);
      audit::account(audit::AccountActivity::move_in, account.name, account.external_id);
    }
    return answer_in(account, "active");
  }

 private:
  // Source, 'moving': stops the box, sends everything; 'sent' once the target committed.
  void send(MoveOut& m, const std::optional<Account>& account, const ClusterNode& target) {
    if (!account)
      throw HttpError(http::status::conflict, "the account of " + m.external_id + " was deleted during its move");
    s_.callers->begin_delete(*account);  // drops its open home and session cwds
    stop_box_for_good(*s_.manager, account->name);
    if (s_.tokens) s_.tokens->flush();
    nlohmann::json doc = moves::records_json(s_.moves->records_of(account->name));
    doc["user"] = account->external_id;
    doc["from"] = s_.placement->node();
    doc["name"] = account->name;
    doc["uid"] = account->uid;
    const std::string dir = s_.state_dir + "/moves/" + m.id;
    make_dir(s_.state_dir + "/moves");
    make_dir(dir);
    replace_file(dir + "/move.json", doc.dump(), 0600);
    const VolumeLease lease = s_.callers->volumes().lease({account->name, account->uid, account->gid});
    const VolumePaths& v = lease.paths();
    moves::ArchivePart volume{v.root, {}};
    for (const char* part : {"home", "trash", "daemon/logs", "workspaces"})
      if (exists(v.root + "/" + part)) volume.entries.push_back(part);
    const std::string path = "/admin/moves/" + m.id + "?user=" + http::percent_encode(m.external_id) +
                             "&from=" + http::percent_encode(s_.placement->node());
    moves::send_archive(moves::node_endpoint(target, s_.admin_key), path,
                        {volume, moves::ArchivePart{dir, {"move.json"}}});
    s_.moves->set_out_state(m.id, "sent", unix_now());
    m.state = "sent";
  }

  // Source, 'sent': deleted here as DELETE /admin/accounts deletes; then 'done'.
  void tombstone(MoveOut& m) {
    moves::move_test_pause("sent");
    s_.accounts->remove(m.name, unix_now());
    const VolumePaths v = s_.callers->volumes().paths(m.name);
    if (exists(v.root) || exists(v.root + ".img")) {
      const std::string kept = s_.callers->volumes().retire(m.name);
      log::info("moves", "move {}: the volume of {} is in {}", m.id, m.name, kept);
    }
    Account gone;
    gone.external_id = m.external_id;
    gone.name = m.name;
    s_.callers->end_delete(gone);
    s_.moves->set_out_state(m.id, "done", unix_now());
    m.state = "done";
    remove_path(s_.state_dir + "/moves/" + m.id);
  }

  // Source, 'done': the target serves the user from now on; 'moved', the tombstone, once it
  // said so (until then the user gets the 503 here, not a 421 naming a node that refuses them).
  Response finish(MoveOut& m, const ClusterNode& target) {
    if (m.state == "done") moves::move_test_pause("done");
    nlohmann::json on =
        moves::post_admin(moves::node_endpoint(target, s_.admin_key), "/admin/moves/" + m.id + "/activate");
    if (m.state != "moved") {
      s_.moves->set_out_state(m.id, "moved", unix_now());
      m.state = "moved";
      s_.move_gate->reload();
    }
    log::info("moves", "move {}: {} is on node {} now", m.id, m.external_id, m.to_node);
    return Response::json({{"id", m.id},
                           {"user", m.external_id},
                           {"from", s_.placement->node()},
                           {"to", m.to_node},
                           {"state", "done"},
                           {"name", on.value("name", "")},
                           {"uid", on.value("uid", 0)}});
  }

  // Target, committed: the staged files take the place of the volume's (empty) ones. Each
  // rename is one step a crash cannot split; a rerun finds what is left in staging.
  Account place(const MoveIn& m) {
    std::optional<Account> account = s_.accounts->find(m.external_id);
    if (!account) throw Error("move " + m.id + ": the account of " + m.external_id + " is missing");
    const VolumeLease lease = s_.callers->lease_volume(*account);  // the volume stays attached meanwhile
    const VolumePaths& v = lease.paths();
    const std::string staging = v.root + "/" + kStaging;
    if (!exists(staging)) return *account;
    const std::pair<std::string, std::string> parts[] = {{"home", v.home},
                                                         {"trash", v.trash},
                                                         {"daemon/logs", v.daemon + "/logs"},
                                                         {"workspaces", v.root + "/workspaces"}};
    for (const auto& [part, into] : parts) {
      const std::string from = staging + "/" + part;
      if (!exists(from)) continue;
      remove_path(into);
      if (::rename(from.c_str(), into.c_str()) != 0) throw sys_error("rename(" + from + ", " + into + ")");
    }
    remove_path(staging);
    s_.callers->close_home(account->name);  // a descriptor of the empty home kept open would show it
    return *account;
  }

  static Response answer_in(const Account& account, std::string_view state = "committed") {
    return Response::json({{"state", state}, {"name", account.name}, {"uid", account.uid}});
  }

  const Services s_;   // a cluster node's: placement, moves and move_gate are set
  std::mutex out_mu_;  // one move out at a time: a rerun waits for the run it resumes
  std::mutex in_mu_;   // one move in at a time
};

}  // namespace

void add_move_routes(Router& router, const Services& s) {
  auto mover = std::make_shared<Mover>(s);
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  const RouteOptions admin{.admin = true};
  router.add_async(http::verb::post, "/admin/moves",
                   offload(pool, Handler([mover](const Request& req) { return mover->start(req); })), admin);
  // The archive, as big as a volume, is unpacked while it arrives: the route takes the
  // connection and reads it on a pool thread.
  router.add_takeover(
      http::verb::put, "/admin/moves/{id}",
      [mover, pool](Takeover t) {
        auto upload = std::make_shared<Takeover>(std::move(t));
        pool->post(upload->request.query_param("user").value_or(""), [mover, upload] {
          Response r;
          try {
            r = mover->receive(*upload);
          } catch (...) {
            r = error_response_for(std::current_exception(), "PUT /admin/moves/{id}");
          }
          respond_and_close(std::move(*upload), std::move(r));
        });
      },
      admin);
  router.add_async(http::verb::post, "/admin/moves/{id}/activate",
                   offload(pool, Handler([mover](const Request& req) { return mover->activate(req); })), admin);
}

}  // namespace agentbox::api
