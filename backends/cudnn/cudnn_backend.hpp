// The cuDNN backend: legacy-API algorithms and graph-API engine configurations.
#pragma once

#include "convtune/backend.hpp"

namespace convtune {

Backend& cudnn_backend();

}  // namespace convtune
