// A backend defined outside the library: one direct forward algorithm on the host. It shows
// what adding a backend takes: these two files and one registration line
// (`convtune::register_backend(example_backend())`, in tests/test_example_backend.cpp).
#pragma once

#include "convtune/backend.hpp"

namespace convtune::example {

// The backend "example", with the algorithm "example.direct" (fwd, f32, NCHW, groups 1).
Backend& example_backend();

}  // namespace convtune::example
