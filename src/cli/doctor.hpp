#pragma once
// `agentbox doctor`: what this host offers (box/host_support.hpp), what agentbox will enforce
// with it, and how to fix what is missing.
#include <ostream>

namespace agentbox {

// Prints the feature table, the enforcement summary and one "missing: NAME — FIX" line per
// missing required feature. Returns 0 when everything required is present, 1 otherwise.
int run_doctor(bool as_root, std::ostream& out);

}  // namespace agentbox
