// Byte counts as people write them: what --max-bytes, CONVTUNE_MAX_BYTES and the like accept.
#pragma once

#include <cstddef>
#include <string_view>

namespace convtune {

// "4096", "512K", "64M", "8G", "1T" (powers of 1024; a trailing "iB" or "B" is accepted).
// Throws ParseError naming `what` on anything else, zero, or an overflowing value.
std::size_t parse_byte_size(std::string_view text, std::string_view what = "size");

}  // namespace convtune
