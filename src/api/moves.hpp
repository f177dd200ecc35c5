#pragma once
// Moving an account to another node of the cluster (docs/SCALING.md "Moves"), admin key only;
// the nodes of a cluster share one admin key. `agentbox accounts move USER --to n3` asks the
// source node, which drives the move and asks the target:
//
//   POST /admin/moves {"user", "to"}        on the source. Starts the move (or resumes the
//                                           user's unfinished one) and returns once it is done:
//                                           {"id", "user", "from", "to", "state": "done", "uid"}
//   PUT  /admin/moves/{id}?user=U&from=n1   on the target: the archive (moves/transfer.hpp)
//                                           as the body, unpacked as it arrives; re-owns and
//                                           commits; answers
//                                           {"state": "committed", "name", "uid"}. Again for a
//                                           committed move: the same answer, nothing redone.
//   POST /admin/moves/{id}/activate         on the target: the account is served from now on.
//
// The steps, each recorded before the next, so that running the move again after a crash of
// either node or of the CLI at any point finishes it (every step is idempotent):
//   source  moves_out 'moving': from here the user's requests get 503 "being moved" here;
//           the box stops; the archive goes to the target
//   target  moves_in 'receiving' (the user's requests get 503 there too, until activated), the
//           account made with a uid of its own range; unpacked into VOLUME/.move-in, re-owned;
//           then records + 'committed' in one transaction (the commit point); renamed into place
//   source  'sent'; the account and its records deleted, its volume to the trash area
//           (as DELETE /admin/accounts does); 'done'
//   target  'active': served
//   source  'moved': the tombstone, 421 naming the target
// At no time do both nodes serve the user: the source refuses from 'moving' on, the target
// until 'active', which comes only after the source's 'done' (its account deleted). Before the target's commit the
// source holds everything and a rerun sends it again; after it, the target holds everything
// and a rerun only finishes the remaining steps.
#include <cstdint>
#include <memory>
#include <string>

#include "accounts/directory.hpp"
#include "accounts/move_gate.hpp"
#include "accounts/placement_guard.hpp"
#include "box/box_manager.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"
#include "store/account_store.hpp"
#include "store/move_store.hpp"
#include "store/token_usage.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
// A cluster node's only (services.placement, moves and move_gate set). The routes run on the
// file pool (a move waits for a box to stop and for the other node).
void add_move_routes(Router& router, const Services& services);

}  // namespace agentbox::api
