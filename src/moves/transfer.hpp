#pragma once
// The bytes of a move between cluster nodes (api/moves.hpp): the source streams a tar
// archive (GNU tar, --numeric-owner, symlinks as links, nothing followed) of the account's
// home, trash and process logs plus move.json (its records) as the chunked body of one
// `PUT /admin/moves/{id}` to the target, which unpacks it into a staging directory as it
// arrives (each byte written once there) and gives every file the account's new uid and gid.
// The nodes of a cluster share one admin key.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.hpp"
#include "http/router.hpp"

namespace agentbox::moves {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// A node's admin routes as this node reaches them.
struct NodeEndpoint {
  std::string name;
  std::string host;  // numeric or a name
  uint16_t port = 0;
  std::string admin_key;
};

// From the cluster file's admin_url ("http://HOST:PORT", plain HTTP); Error for anything else.
NodeEndpoint node_endpoint(const ClusterNode& node, std::string admin_key);

// The archive's parts: (directory, entry) pairs, each entry relative to its directory.
struct ArchivePart {
  std::string dir;
  std::vector<std::string> entries;
};

// Streams tar of `parts` as the body of PUT `target` (path and query) on `to` and returns the
// JSON answer of a 2xx. A refusal is HttpError with the node's status and detail; a node that
// cannot be reached or hangs up is HttpError 502 naming it.
nlohmann::json send_archive(const NodeEndpoint& to, const std::string& target, const std::vector<ArchivePart>& parts);

// POST `target` on `to` (no body): the JSON answer of a 2xx, errors as send_archive's.
nlohmann::json post_admin(const NodeEndpoint& to, const std::string& target);

// Unpacks the tar archive that is the body of the request `upload` holds into dir (which
// exists) while it arrives, owned by root with the archive's modes and times. Error with tar's
// last line when tar fails; HttpError 400 for a body that breaks off or is not HTTP, 408 for one
// that stalls. Runs on a thread of its own (it waits on the socket and on the disk).
void receive_archive(Takeover& upload, const std::string& dir);

// Gives every entry under path (itself included, links as links) uid:gid, and then its mode
// again (chown clears set-id bits). Nothing is followed.
void reown_tree(const std::string& path, uid_t uid, gid_t gid);

// Test hook: AGENTBOX_TEST_MOVE_PAUSE="POINT=SECONDS" makes the move sleep at POINT (e2e
// tests kill a daemon there). Points: "transfer" (source, after the first chunk was sent),
// "sent" (source, target committed, before the account is deleted here), "done" (source, before
// it asks the target to activate), "unpacked" and "committed" (target); and "restore-staged"
// (`backup restore --all`: an account's home copied into staging, not renamed into place yet).
void move_test_pause(std::string_view point);

}  // namespace agentbox::moves
