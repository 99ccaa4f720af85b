#include "convtune/byte_size.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include "convtune/error.hpp"

namespace convtune {

std::size_t parse_byte_size(std::string_view text, std::string_view what) {
    const std::string w(what);
    std::string_view s = text;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) throw ParseError(w + ": " + quote_input(text) + " is out of range");
    if (ec != std::errc() || ptr == s.data())
        throw ParseError(w + ": " + quote_input(text) + " is not a byte count (e.g. 4096, 512M, 8G)");
    s.remove_prefix(static_cast<std::size_t>(ptr - s.data()));
    int shift = 0;
    if (!s.empty()) {
        const char units[] = "KMGTPE";
        const char c = static_cast<char>(s.front() & ~0x20);  // upper case
        for (int i = 0; i < 6; ++i)
            if (c == units[i]) shift = 10 * (i + 1);
        if (shift) s.remove_prefix(1);
        if (s == "iB" || s == "B" || (shift && s == "b")) s = {};
    }
    if (!s.empty())
        throw ParseError(w + ": " + quote_input(text) +
                         " has an unknown unit (use K, M, G, T, P or E, powers of 1024)");
    if (v == 0) throw ParseError(w + ": must be above 0");
    if (shift && v > (std::numeric_limits<uint64_t>::max() >> shift))
        throw ParseError(w + ": " + quote_input(text) + " is out of range");
    return static_cast<std::size_t>(v << shift);
}

}  // namespace convtune
