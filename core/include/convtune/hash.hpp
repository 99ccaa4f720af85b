// Non-cryptographic hashes: the one definition of each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace convtune {

// splitmix64's finaliser: a good 64-bit mix, enough to make (seed, index, slot) independent draws.
constexpr uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// 64-bit FNV-1a of a byte string (an output's fingerprint, a key's hash).
constexpr uint64_t fnv1a(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return h;
}
inline uint64_t fnv1a(std::span<const std::byte> bytes) {
    return fnv1a(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace convtune
