#pragma once
// Where things live in the mirror of homes ([backup] dir = MIRROR):
//
//   MIRROR/NAME/account.json             whose home it is: the user id, name, uid, creation
//                                        (backup/mirror_record.hpp), for a restore onto a new node
//   MIRROR/NAME/home/...                 the last consistent copy of account NAME's home
//   MIRROR/NAME/workspaces/...           the same of its contexts' workspaces and their records
//                                        (VOLUME/workspaces/PROFILE/HASH[.json], accounts/workspaces.hpp)
//   MIRROR/NAME/.deleted/YYYY-MM-DD/...  what was deleted or overwritten in that home on that
//                                        day (UTC), at its path relative to the home; the
//                                        workspaces' under .deleted/YYYY-MM-DD/.account-workspaces/
//
// The copy and the kept versions are siblings, so a home holding its own `.deleted` entry never
// mixes with them, and moving an entry into .deleted is a rename on one filesystem.
#include <chrono>
#include <string>
#include <string_view>

namespace agentbox::backup {

inline constexpr std::string_view kHomeDir = "home";
inline constexpr std::string_view kWorkspacesDir = "workspaces";
inline constexpr std::string_view kDeletedDir = ".deleted";
// Under a .deleted day: what was deleted or replaced in the workspaces that day, and, for a
// deleted account, its whole workspaces (-2, -3, ... when that name is taken), as kPutAwayHome.
inline constexpr std::string_view kKeptWorkspaces = ".account-workspaces";
// The home of a deleted account, put away as .deleted/DAY/.account-home (-2, -3, ... when that
// day holds one already).
inline constexpr std::string_view kPutAwayHome = ".account-home";
// A file being copied is written under this prefix and renamed into place when complete; one
// left by a killed daemon is removed by the next pass.
inline constexpr std::string_view kTempPrefix = ".agentbox-mirror-";

// "YYYY-MM-DD" of t in UTC: the name of a .deleted day.
std::string utc_date(std::chrono::system_clock::time_point t);

// True for a name that is a day of .deleted ("2026-12-02").
bool is_date_name(std::string_view name);

}  // namespace agentbox::backup
