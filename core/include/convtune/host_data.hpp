// The host-side helpers in one include: the memory budget (memory_budget.hpp), byte-count
// parsing (byte_size.hpp), and host tensors with execute() (execute.hpp).
#pragma once

#include "convtune/byte_size.hpp"
#include "convtune/execute.hpp"
#include "convtune/memory_budget.hpp"
