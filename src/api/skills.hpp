#pragma once
// Skills (API.md Part A, Open Terminal 0.13): GET /skills lists the skills a caller's assistant
// may use, GET /skills/read?name= and GET /skills/{name} read one (its instructions without the
// front matter, and the names of its other files). Found in the caller's ~/.agents/skills,
// ~/.claude/skills, ~/.codex/skills, ~/.cptr/skills, then the operator's [agent] skills_dir, one
// per name (fs/skills.hpp). Read on the file pool, through ConfinedDirs, as the account.
#include "http/router.hpp"

namespace agentbox::api {

struct Services;
// Uses services.callers, file_pool and skills_dir.
void add_skill_routes(http::Router& router, const Services& services);

}  // namespace agentbox::api
