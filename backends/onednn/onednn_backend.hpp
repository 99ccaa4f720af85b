// The oneDNN backend: every implementation oneDNN offers for a problem, one algorithm each.
#pragma once

#include "convtune/backend.hpp"

namespace convtune {

Backend& onednn_backend();

}  // namespace convtune
