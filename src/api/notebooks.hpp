#pragma once
// /notebooks (API.md Part A, Open Terminal's shapes): POST /notebooks {path} opens a notebook
// with a kernel of its own, POST /notebooks/{id}/execute {cell_index, source?} runs one cell and
// answers its nbformat outputs, GET and DELETE /notebooks/{id}. The kernel runs in the caller's
// box as the caller (exec/notebook_kernels.hpp); the .ipynb is read through the caller's
// ConfinedDir on a file pool thread; cells wait on the box loop. No io thread blocks.
#include "http/router.hpp"

namespace agentbox::api {

struct Services;
// Uses services.callers, .file_pool, .boxes and .notebooks (null: the routes are not added).
void add_notebook_routes(http::Router& router, const Services& services);

}  // namespace agentbox::api
