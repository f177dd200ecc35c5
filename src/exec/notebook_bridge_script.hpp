#pragma once
// The notebook bridge's Python source (src/exec/notebook_bridge.py), compiled in by CMake: a box
// runs it as `python3 -c kNotebookBridgeScript CELL_TIMEOUT` (exec/notebook_kernels.hpp).
namespace agentbox::exec {
extern const char* const kNotebookBridgeScript;
}
